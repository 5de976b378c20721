import Katana

/// The outside world, injected into every side effect. These simulate I/O with sleeps; tests and the real app
/// pass other implementations.
public struct PaymentGateway: Sendable {
    public var charge: @Sendable (_ orderID: Int, _ amountCents: Int) async throws -> Void

    public init(charge: @escaping @Sendable (_ orderID: Int, _ amountCents: Int) async throws -> Void) { self.charge = charge }

    /// Takes 1–3 ms and declines every 13th order.
    public static let simulated = PaymentGateway { orderID, _ in
        try await Task.sleep(for: .microseconds(1_000 + (orderID * 7_919) % 2_000))
        if orderID % 13 == 0 { throw ShopError.declined(orderID: orderID) }
    }
}

public struct Warehouse: Sendable {
    public var ship: @Sendable (_ orderID: Int) async throws -> Void

    public init(ship: @escaping @Sendable (_ orderID: Int) async throws -> Void) { self.ship = ship }

    /// Takes 2 ms.
    public static let simulated = Warehouse { _ in try await Task.sleep(for: .milliseconds(2)) }
}

public struct ShopDependencies: SideEffectDependencyContainer {
    public let payments: PaymentGateway
    public let warehouse: Warehouse

    public init(payments: PaymentGateway, warehouse: Warehouse) {
        self.payments = payments
        self.warehouse = warehouse
    }

    public init(dispatch: @escaping AnyDispatch, getState: @escaping GetState) {
        self.init(payments: .simulated, warehouse: .simulated)
    }
}

public typealias ShopStore = Store<ShopState, ShopDependencies>
public typealias ShopContext = SideEffectContext<ShopState, ShopDependencies>

// MARK: - Side effects: concurrent, they talk to the world and dispatch updaters.

/// An order from start to end: reserve the stock, charge, ship. Any failure fails the order (and releases its
/// stock); the error is rethrown so the caller's handle reports it.
public struct ProcessOrder: SideEffect, Codable {
    public let orderID: Int
    public init(orderID: Int) { self.orderID = orderID }

    public func sideEffect(_ context: ShopContext) async throws {
        do {
            try await context.dispatch(ReserveStock(orderID: orderID)).value
            try await context.dispatch(ChargePayment(orderID: orderID)).value
            try await context.dispatch(ShipOrder(orderID: orderID)).value
        } catch {
            try await context.dispatch(FailOrder(orderID: orderID, reason: "\(error)")).value
            throw error
        }
    }
}

public struct ChargePayment: SideEffect, Codable {
    public let orderID: Int
    public func sideEffect(_ context: ShopContext) async throws {
        guard let order = context.getState().orders[orderID] else { throw ShopError.unknownOrder(orderID) }
        let amount = order.priceCents * order.quantity
        // An interval: the gateway call shows inside this side effect in the trace.
        try await context.interval("payment gateway") { try await context.dependencies.payments.charge(orderID, amount) }
        try await context.dispatch(RecordPayment(orderID: orderID, amountCents: amount)).value
    }
}

public struct ShipOrder: SideEffect, Codable {
    public let orderID: Int
    public func sideEffect(_ context: ShopContext) async throws {
        try await context.interval("warehouse") { try await context.dependencies.warehouse.ship(orderID) }
        try await context.dispatch(MarkShipped(orderID: orderID)).value
    }
}
