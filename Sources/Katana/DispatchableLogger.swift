import Logging

/// Logs every dispatched item through swift-log, as Katana's `DispatchableLogger` printed them.
public enum DispatchableLogger {
    /// An interceptor that logs `dispatched <Type>` at `level` for every item whose exact type is not in
    /// `blackList`, then forwards it unchanged. The type name is built only when the logger would emit it.
    public static func interceptor(
        blackList: [any Dispatchable.Type] = [],
        logger: Logger = Logger(label: "katana.dispatch"),
        level: Logger.Level = .info
    ) -> StoreInterceptor {
        let skipped = Set(blackList.map { ObjectIdentifier($0) })
        return { _ in
            { next in
                { item in
                    let type = Swift.type(of: item)
                    if !skipped.contains(ObjectIdentifier(type)) {
                        logger.log(level: level, "dispatched \(String(reflecting: type))",
                                   metadata: ["kind": item._katanaStateUpdater != nil ? "state_updater" : "side_effect"])
                    }
                    try next(item)
                }
            }
        }
    }
}
