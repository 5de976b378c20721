import Katana

/// One order's life: placed → reserved → paid → shipped, or failed on the way.
public enum OrderStatus: Sendable, Equatable, Codable {
    case placed, reserved, paid, shipped
    case failed(String)
}

public struct Order: Sendable, Equatable, Codable {
    public let id: Int
    public let sku: String
    public let quantity: Int
    public let priceCents: Int
    public var status: OrderStatus = .placed

    public init(id: Int, sku: String, quantity: Int, priceCents: Int) {
        self.id = id
        self.sku = sku
        self.quantity = quantity
        self.priceCents = priceCents
    }
}

public struct ShopState: State, Codable, Equatable {
    public var orders: [Int: Order] = [:]
    public var stock: [String: Int]
    public var revenueCents = 0

    public init() { stock = [:] }
    public init(stock: [String: Int]) { self.stock = stock }

    public func count(_ status: OrderStatus) -> Int { orders.values.count { $0.status == status } }
    public var failed: Int { orders.values.count { if case .failed = $0.status { true } else { false } } }
}

public enum ShopError: Error, Equatable, CustomStringConvertible {
    case unknownOrder(Int)
    case outOfStock(sku: String)
    case declined(orderID: Int)

    public var description: String {
        switch self {
        case .unknownOrder(let id): "no order \(id)"
        case .outOfStock(let sku): "out of stock: \(sku)"
        case .declined(let id): "payment declined for order \(id)"
        }
    }
}

// MARK: - State updaters: the only code that changes the state.

public struct PlaceOrder: StateUpdater, Codable {
    public let order: Order
    public init(_ order: Order) { self.order = order }
    public func updateState(_ state: inout ShopState) { state.orders[order.id] = order }
}

/// Takes the order's items from stock, or refuses (and changes nothing) when there are too few. It decides before it
/// changes anything, so the store applies it in place: as a `ThrowingStateUpdater` it would work on a copy of the
/// state, and copy every order on each reservation.
public struct ReserveStock: ValidatingStateUpdater, Codable {
    public let orderID: Int
    public init(orderID: Int) { self.orderID = orderID }
    public func validate(_ state: ShopState) throws {
        guard let order = state.orders[orderID] else { throw ShopError.unknownOrder(orderID) }
        guard state.stock[order.sku, default: 0] >= order.quantity else { throw ShopError.outOfStock(sku: order.sku) }
    }
    public func updateValidatedState(_ state: inout ShopState) {
        guard let order = state.orders[orderID] else { return }
        state.stock[order.sku, default: 0] -= order.quantity
        state.orders[orderID]?.status = .reserved
    }
}

public struct RecordPayment: StateUpdater, Codable {
    public let orderID: Int
    public let amountCents: Int
    public init(orderID: Int, amountCents: Int) {
        self.orderID = orderID
        self.amountCents = amountCents
    }
    public func updateState(_ state: inout ShopState) {
        state.orders[orderID]?.status = .paid
        state.revenueCents += amountCents
    }
}

public struct MarkShipped: StateUpdater, Codable {
    public let orderID: Int
    public init(orderID: Int) { self.orderID = orderID }
    public func updateState(_ state: inout ShopState) { state.orders[orderID]?.status = .shipped }
}

/// Fails the order and, if its stock was reserved, puts the items back.
public struct FailOrder: StateUpdater, Codable {
    public let orderID: Int
    public let reason: String
    public func updateState(_ state: inout ShopState) {
        guard let order = state.orders[orderID] else { return }
        if order.status == .reserved { state.stock[order.sku, default: 0] += order.quantity }
        state.orders[orderID]?.status = .failed(reason)
    }
}
