// A to-do list: each line of standard input is a command, each command a dispatch, and a listener prints every
// change. `add TEXT`, `done N`, `save`, `quit`.
import Foundation
import Katana

struct TodoState: State {
    var items: [String] = []
    var done: Set<Int> = []
    var saved = 0
}

struct AddItem: StateUpdater {
    let text: String
    func updateState(_ state: inout TodoState) { state.items.append(text) }
}

struct CompleteItem: ThrowingStateUpdater {
    let index: Int
    func updateState(_ state: inout TodoState) throws {
        guard state.items.indices.contains(index) else { throw TodoError.noSuchItem(index + 1) }
        state.done.insert(index)
    }
}

struct MarkSaved: StateUpdater {
    let count: Int
    func updateState(_ state: inout TodoState) { state.saved = count }
}

enum TodoError: Error, CustomStringConvertible {
    case noSuchItem(Int)
    var description: String {
        switch self {
        case .noSuchItem(let n): "there is no item \(n)"
        }
    }
}

/// "Saves" the list (simulated I/O), then records how many items were saved.
struct Save: SideEffect {
    func sideEffect(_ context: SideEffectContext<TodoState, EmptySideEffectDependencyContainer>) async throws {
        let count = context.getState().items.count
        try await Task.sleep(for: .milliseconds(5))
        try await context.dispatch(MarkSaved(count: count)).value
    }
}

/// One line of output, written at once (standard output is a pipe when a program drives this one).
func line(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

let store = Store<TodoState, EmptySideEffectDependencyContainer>()
store.addListener { old, new in
    if new.items.count > old.items.count, let item = new.items.last { line("added #\(new.items.count): \(item)") }
    for index in new.done.subtracting(old.done).sorted() { line("done #\(index + 1): \(new.items[index])") }
    if new.saved != old.saved { line("saved \(new.saved) items") }
}

while let input = readLine() {
    let words = input.split(separator: " ", maxSplits: 1).map(String.init)
    do {
        switch (words.first, words.count) {
        case ("add", 2): try await store.dispatch(AddItem(text: words[1])).value
        case ("done", 2):
            guard let n = Int(words[1]) else { line("error: done takes a number"); continue }
            try await store.dispatch(CompleteItem(index: n - 1)).value
        case ("save", 1): try await store.dispatch(Save()).value
        case ("quit", 1): exit(0)
        default: line("error: commands are add TEXT, done N, save, quit")
        }
    } catch {
        line("error: \(error)")
    }
}
