/// Receives what a store applies and starts, in the order it does — the hook a dispatch log records through
/// (`KatanaDispatchLog`'s `DispatchLogRecorder`). Set with ``StoreConfiguration/dispatchRecorder``; a store without
/// one pays nothing for it.
///
/// A store with a recorder gives every dispatch an id (as while a trace backend records), so each item carries its
/// parent's: the id of the side effect that dispatched it, 0 for a top-level dispatch.
public protocol DispatchRecorder: AnyObject, Sendable {
    /// An updater the store is about to apply, called under its lane: the calls come in the order the updaters are
    /// applied. With interceptors, it is the updater they pass on — one they drop is never told, one they change
    /// is told as changed — under the id of the dispatch they intercepted. Keep it short: every dispatch of the store
    /// waits for it. `stateBefore` gives the state as it is now — every earlier updater applied, this one not yet —
    /// for a recorder that checkpoints the state now and then (call it only then: holding the state makes the store
    /// copy it on its next change).
    func applying(_ updater: any AnyStateUpdater, id: UInt64, parentID: UInt64, stateBefore: () -> any State)
    /// A side effect the store starts (on the side effect's task, before its body).
    func starting(_ sideEffect: any AnySideEffect, id: UInt64, parentID: UInt64)
}
