import Foundation
import KatanaTestSupport
import Testing

/// The katana-router-example binary built next to this test binary.
let routerExample = builtExecutable(named: "katana-router-example")

@Suite struct ExampleTests {
    /// The README shows this output: the example must keep printing exactly it.
    @Test func theTabsAndStackFlowPrintsTheRoutableCallsTheReadmeShows() async throws {
        // Untraced: a recording test running at the same time must not see this process's events.
        let (status, output, _) = try await runProcessSuspending(routerExample, ["--no-trace"])
        #expect(status == 0)
        #expect(output == expectedExampleOutput)
    }

    @Test func anUnknownArgumentIsRefused() async throws {
        let (status, output, errors) = try await runProcessSuspending(routerExample, ["--fast"])
        #expect(status == 2)
        #expect(output.isEmpty)
        #expect(errors.contains("unknown argument --fast"))
    }
}

let expectedExampleOutput = """
> open the app
[window] push Tabs(tabs)
  now at: Tabs(tabs)
> add the tabs
  [Tabs(tabs)] change: remove [] add ["Catalog(catalog)", "Cart(cart)", "Account(account)"]
  [Tabs(tabs)] show Catalog(catalog)
  now at: Tabs(tabs) > Catalog(catalog)
> open a product
    [Catalog(catalog)] push Product(product-42)
    [Catalog(catalog)] show Product(product-42)
  now at: Tabs(tabs) > Catalog(catalog) > Product(product-42)
> read its reviews
      [Product(product-42)] push Reviews(reviews-42)
      [Product(product-42)] show Reviews(reviews-42)
  now at: Tabs(tabs) > Catalog(catalog) > Product(product-42) > Reviews(reviews-42)
> back
      [Product(product-42)] pop Reviews(reviews-42)
  now at: Tabs(tabs) > Catalog(catalog) > Product(product-42)
> switch to the cart tab
  [Tabs(tabs)] show Cart(cart) instead of Catalog(catalog)
  now at: Tabs(tabs) > Cart(cart)
> start checkout
    [Cart(cart)] push Shipping(shipping)
    [Cart(cart)] show Shipping(shipping)
  now at: Tabs(tabs) > Cart(cart) > Shipping(shipping)
> next: payment
      [Shipping(shipping)] push Payment(payment)
      [Shipping(shipping)] show Payment(payment)
  now at: Tabs(tabs) > Cart(cart) > Shipping(shipping) > Payment(payment)
> remove a destination that is not there
  refused: no destination with user identifier "gift-wrap" in the navigation tree
  now at: Tabs(tabs) > Cart(cart) > Shipping(shipping) > Payment(payment)
> open the product twice
  refused: user identifier "product-42" is already in the navigation tree
  now at: Tabs(tabs) > Cart(cart) > Shipping(shipping) > Payment(payment)
> cancel checkout
      [Shipping(shipping)] pop Payment(payment)
    [Cart(cart)] pop Shipping(shipping)
  now at: Tabs(tabs) > Cart(cart)
> back to the catalog tab
  [Tabs(tabs)] show Catalog(catalog) instead of Cart(cart)
  now at: Tabs(tabs) > Catalog(catalog) > Product(product-42)
> log out
  [Tabs(tabs)] change: remove ["Cart(cart)", "Account(account)", "Catalog(catalog)"] add []
    [Catalog(catalog)] pop Product(product-42)
[window] change: remove ["Tabs(tabs)"] add ["Login(login)"]
  now at: Login(login)

"""
