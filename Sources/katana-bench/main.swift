print("katana-bench")
