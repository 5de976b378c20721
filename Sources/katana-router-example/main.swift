import Katana
import KatanaRouter
import KatanaTrace
import Foundation

// A headless shop: tabs (catalog, cart, account), a stack under each, and a checkout wizard, all driven by
// dispatched navigation actions. Each routable prints the calls the router makes on it, indented by depth.

struct ShopState: RoutableState {
    var navigationState = NavigationState()
}

/// Prints every call it gets and hands out a routable of the same kind for each new destination.
struct PrintingRoutable: Routable {
    let name: String
    let depth: Int

    func say(_ text: String) { print(String(repeating: "  ", count: depth + 1) + "[\(name)] " + text) }

    func push(_ destination: Destination) async throws -> any Routable {
        say("push \(destination)")
        return PrintingRoutable(name: destination.description, depth: depth + 1)
    }

    func pop(_ destination: Destination) async throws { say("pop \(destination)") }

    func change(removing removed: [Destination], adding added: [Destination]) async throws -> [Destination: any Routable] {
        say("change: remove \(removed.map(\.description)) add \(added.map(\.description))")
        return Dictionary(uniqueKeysWithValues: added.map { ($0, PrintingRoutable(name: $0.description, depth: depth + 1)) })
    }

    func changeActiveDestination(from: Destination?, to: Destination) async throws {
        say("show \(to)" + (from.map { " instead of \($0)" } ?? ""))
    }
}

func place(_ kind: String, _ id: String, _ context: (any Sendable)? = nil) -> Destination {
    Destination(routableType: kind, contextData: context, userIdentifier: id)
}

// `--no-trace`: emit no tracepoints (the tests use it so that this run does not land in another test's recording).
if CommandLine.arguments.dropFirst().contains("--no-trace") {
    KatanaTracing.bootstrap(NoOpTraceBackend())
} else if let unknown = CommandLine.arguments.dropFirst().first {
    FileHandle.standardError.write(Data("katana-router-example: unknown argument \(unknown) (the only option is --no-trace)\n".utf8))
    exit(2)
}

let store = Store<ShopState, EmptySideEffectDependencyContainer>()
let router = Router(store: store, rootRoutable: PrintingRoutable(name: "window", depth: -1))
router.start()

/// Dispatches one action, waits for the routables, and prints where the app is.
func step(_ title: String, _ action: some NavigationAction) async {
    print("> \(title)")
    do {
        try await store.dispatch(action).value
    } catch {
        print("  refused: \(error)")
    }
    await router.waitUntilIdle()
    print("  now at: " + store.state.navigationState.activeRoute.map(\.description).joined(separator: " > "))
}

await step("open the app", SetRootDestination(place("Tabs", "tabs")))
await step("add the tabs", AddChildrenToDestination(
    [place("Catalog", "catalog"), place("Cart", "cart"), place("Account", "account")], to: .user("tabs"), activeChild: 0))
await step("open a product", AddNewDestination(place("Product", "product-42", 42)))
await step("read its reviews", AddNewDestination(place("Reviews", "reviews-42", 42)))
await step("back", RemoveCurrentDestination())
await step("switch to the cart tab", ChangeActiveDestination(.user("cart")))
await step("start checkout", AddNewDestination(place("Shipping", "shipping")))
await step("next: payment", AddNewDestination(place("Payment", "payment")))
await step("remove a destination that is not there", RemoveDestination(.user("gift-wrap")))
await step("open the product twice", AddNewDestination(place("Product", "product-42")))
await step("cancel checkout", RemoveDestination(.user("shipping")))
await step("back to the catalog tab", ChangeActiveDestination(.user("catalog")))
await step("log out", SetRootDestination(place("Login", "login")))
router.stop()
