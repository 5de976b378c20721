// order-service: takes N orders with C of them in flight at a time, prints a summary. Nothing here mentions
// tracing: the target depends on KatanaLTTng, so every dispatch below is an LTTng tracepoint when a session
// records `katana:*` (see README.md). `--record LOG` also writes every dispatch to a dispatch log that order-bench
// replays (`order-bench replay LOG`; the Record and Replay guide).
// Usage: order-service [--orders N] [--concurrency C] [--record LOG] [--checkpoint-every N]
import Katana
import KatanaDispatchLog
import OrderProcessing

let tool = "order-service"
let options = OrderService.options(tool, usage: "[--orders N] [--concurrency C] [--record LOG] [--checkpoint-every N]",
                                   flags: ["--orders", "--concurrency", "--record", "--checkpoint-every"])
let orders = OrderService.number(options, "--orders", default: 200, tool: tool)
let concurrency = OrderService.number(options, "--concurrency", default: 8, tool: tool)
let checkpointEvery = OrderService.number(options, "--checkpoint-every", default: 1_000, tool: tool)
let initialState = OrderService.initialState(orders: orders)
let recorder: DispatchLogRecorder?
do {
    recorder = try options["--record"].map { try DispatchLogRecorder(path: $0, initialState: initialState, checkpointEvery: checkpointEvery) }
} catch {
    OrderService.fail(tool, "\(error)")
}
let store = ShopStore(stateInitializer: { initialState }, configuration: .init(dispatchRecorder: recorder))
print(await OrderService.run(store, orders: orders, concurrency: concurrency))
if let recorder {
    do {
        try recorder.finish(finalState: store.state)
    } catch {
        OrderService.fail(tool, "\(error)")
    }
    print("recorded: \(recorder.writer.path)")
}
