import Logging

/// Logs every dispatched item through swift-log, as Katana's `DispatchableLogger` printed them.
public enum DispatchableLogger {
    /// An interceptor that logs `dispatched <Type>` at `level` for every item whose exact type is not in
    /// `blackList`, then forwards it unchanged. The type name is built only when the logger would emit it.
    /// (The closure form of ``Interceptor``, for a store's `interceptors:` array.)
    public static func interceptor(
        blackList: [any Dispatchable.Type] = [],
        logger: Logger = Logger(label: "katana.dispatch"),
        level: Logger.Level = .info
    ) -> StoreInterceptor {
        Interceptor(blackList: blackList, logger: logger, level: level).storeInterceptor
    }

    /// The logger as a ``DispatchInterceptor``, for ``StoreConfiguration/interceptors`` (the cheaper form on every
    /// dispatch's path).
    public struct Interceptor: TypedDispatchInterceptor {
        private let skipped: Set<ObjectIdentifier>
        private let logger: Logger
        private let level: Logger.Level

        /// Logs every dispatched item's type at `level` to `logger`, except the types in `blackList`.
        public init(
            blackList: [any Dispatchable.Type] = [],
            logger: Logger = Logger(label: "katana.dispatch"),
            level: Logger.Level = .info
        ) {
            skipped = Set(blackList.map { ObjectIdentifier($0) })
            self.logger = logger
            self.level = level
        }

        /// Logs the item (unless its type is black-listed) and passes it on unchanged.
        public func intercept<Item: Dispatchable>(_ item: Item, next: (Item) throws -> Void,
                                                  forward: (any Dispatchable) throws -> Void) throws {
            let type = Swift.type(of: item)
            if !skipped.contains(ObjectIdentifier(type)) {
                logger.log(level: level, "dispatched \(String(reflecting: type))",
                           metadata: ["kind": item._katanaStateUpdater != nil ? "state_updater" : "side_effect"])
            }
            try next(item)
        }
    }
}
