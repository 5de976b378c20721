// order-service: takes N orders with C of them in flight at a time, prints a summary. Nothing here mentions
// tracing: the target depends on KatanaLTTng, so every dispatch below is an LTTng tracepoint when a session
// records `katana:*` (see README.md). Usage: order-service [--orders N] [--concurrency C]
import Katana
import OrderProcessing

let tool = "order-service"
let options = OrderService.options(tool, usage: "[--orders N] [--concurrency C]", flags: ["--orders", "--concurrency"])
let orders = OrderService.number(options, "--orders", default: 200, tool: tool)
let concurrency = OrderService.number(options, "--concurrency", default: 8, tool: tool)
let initialState = OrderService.initialState(orders: orders)
let store = ShopStore(stateInitializer: { initialState })
print(await OrderService.run(store, orders: orders, concurrency: concurrency))
