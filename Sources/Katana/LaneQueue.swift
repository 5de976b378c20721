/// The updaters waiting in a store's lane, oldest first. Taking a prefix is O(taken): a head index moves, and the
/// storage is compacted only when the taken part is large, so a thread that helps with a long backlog pays for the
/// items it applies, not for the backlog's length.
@usableFromInline
struct LaneQueue {
    @usableFromInline var items: [LaneItem] = []
    /// Items before `head` were taken already.
    @usableFromInline var head = 0

    @inlinable init() {}

    @inlinable var count: Int { items.count &- head }
    @inlinable var isEmpty: Bool { head == items.count }

    @inlinable mutating func append(_ item: LaneItem) { items.append(item) }

    /// Moves up to `limit` of the oldest items into `buffer`, which must be empty.
    @inlinable
    mutating func take(upTo limit: Int, into buffer: inout [LaneItem]) {
        let available = count
        if head == 0, limit >= available {
            swap(&items, &buffer)  // the common case: everything, with no copying
            return
        }
        let taken = Swift.min(limit, available)
        buffer.append(contentsOf: items[head..<(head &+ taken)])
        head &+= taken
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024, head &* 2 >= items.count {
            // Drop the taken prefix (and the references it still holds) once it is at least half the storage.
            items.removeFirst(head)
            head = 0
        }
    }
}
