import Foundation
import Katana
import KatanaFlightRecorder
import KatanaTestSupport
import KatanaTrace
import Testing

/// The `katana:*` events as the LTTng provider (`Sources/CLTTng/katana_tp.h`) declares them: the one definition the
/// other spellings — the flight recorder's metadata, the Swift vocabulary, the readers' role tables — must agree with.
struct TraceSchema: Equatable, CustomStringConvertible {
    /// A payload field: its name (no TSDL underscore) and its type (`u64`, `u32`, `u8`, `string`, `enum kind`, …).
    struct Field: Equatable, CustomStringConvertible {
        var name: String
        var type: String
        var description: String { "\(type) \(name)" }
    }

    /// Each event's fields in order, by event name (no provider prefix).
    var events: [String: [Field]] = [:]
    /// Each enumeration's labels by value, by the enumeration's name (the field it types).
    var enumerations: [String: [UInt8: String]] = [:]

    var description: String {
        events.keys.sorted().map { "\($0)(\(events[$0]!.map(\.description).joined(separator: ", ")))" }.joined(separator: "; ")
            + " enums " + enumerations.keys.sorted().map { "\($0)\(enumerations[$0]!.sorted { $0.key < $1.key })" }.joined(separator: " ")
    }

    /// The provider header's events and enumerations.
    static func provider(_ header: String) throws -> TraceSchema {
        var schema = TraceSchema()
        for match in header.matches(of: /LTTNG_UST_TRACEPOINT_ENUM\(katana, (\w+),(.*?\))\s*\)\s*\)/.dotMatchesNewlines()) {
            var labels: [UInt8: String] = [:]
            for value in String(match.2).matches(of: /lttng_ust_field_enum_value\("(\w+)", (\d+)\)/) {
                labels[UInt8(value.2)!] = String(value.1)
            }
            schema.enumerations[String(match.1)] = labels
        }
        // A declaration's fields: the LTTNG_UST_TP_FIELDS( … ) that follows it, up to the next declaration.
        func fields(after index: String.Index) -> [Field] {
            let rest = header[index...]
            let end = rest.dropFirst().firstRange(of: "LTTNG_UST_TRACEPOINT_")?.lowerBound ?? rest.endIndex
            return rest[..<end].matches(of: /lttng_ust_field_(integer|enum|string|sequence_text)\(([^)]*)\)/).map { field in
                let arguments = field.2.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                switch field.1 {
                case "integer": return Field(name: arguments[1], type: integerType(arguments[0]))
                case "enum": return Field(name: arguments[3], type: "enum \(arguments[1])")
                case "string": return Field(name: arguments[0], type: "string")
                default: return Field(name: arguments[1], type: "string")  // a counted text sequence reads as a string
                }
            }
        }
        var classes: [String: [Field]] = [:]
        for match in header.matches(of: /LTTNG_UST_TRACEPOINT_EVENT_CLASS\(katana, (\w+),/) {
            classes[String(match.1)] = fields(after: match.range.upperBound)
        }
        for match in header.matches(of: /LTTNG_UST_TRACEPOINT_EVENT_INSTANCE\(katana, (\w+), katana, (\w+),/) {
            let shared: [Field] = try #require(classes[String(match.1)], "no class \(match.1)")
            schema.events[String(match.2)] = shared
        }
        for match in header.matches(of: /LTTNG_UST_TRACEPOINT_EVENT\(katana, (\w+),/) {
            schema.events[String(match.1)] = fields(after: match.range.upperBound)
        }
        return schema
    }

    static func integerType(_ c: String) -> String {
        switch c {
        case "uint64_t": "u64"
        case "uint32_t": "u32"
        case "uint8_t": "u8"
        case "int64_t": "s64"
        case "int32_t": "s32"
        default: c
        }
    }

    /// The `katana:*` events of a CTF metadata text (TSDL), their enumerations named by the fields they type.
    static func metadata(_ text: String) -> TraceSchema {
        var schema = TraceSchema()
        for event in text.matches(of: /event \{\s*name = "katana:(\w+)";.*?fields := struct \{(.*?)\};\s*\};/.dotMatchesNewlines()) {
            let body = String(event.2)
            var fields: [Field] = []
            let declaration = /(enum : integer \{([^}]*)\} \{([^}]*)\}|integer \{([^}]*)\}|string(?: \{[^}]*\})?)\s+_(\w+)\s*;/
            for field in body.matches(of: declaration) {
                let name = String(field.5)
                if let enumBody = field.3 {
                    var labels: [UInt8: String] = [:]
                    for mapping in String(enumBody).matches(of: /"(\w+)" = (\d+)/) { labels[UInt8(mapping.2)!] = String(mapping.1) }
                    schema.enumerations[name] = labels
                    fields.append(Field(name: name, type: "enum \(name)"))
                } else if let integer = field.4 {
                    let size = integer.firstMatch(of: /size = (\d+)/).map { String($0.1) } ?? "?"
                    let signed = integer.contains("signed = 1") ? "s" : "u"
                    fields.append(Field(name: name, type: signed + size))
                } else {
                    fields.append(Field(name: name, type: "string"))
                }
            }
            schema.events[String(event.1)] = fields
        }
        return schema
    }
}

/// The trace schema is defined once, by the LTTng provider; every other spelling of it is checked against that here,
/// so a field added in one place and not the others fails the suite.
@Suite struct TraceSchemaTests {
    static let header = Paths.packageRoot.appendingPathComponent("Sources/CLTTng/katana_tp.h")
    static func source(_ path: String) throws -> String {
        try String(contentsOf: Paths.packageRoot.appendingPathComponent(path), encoding: .utf8)
    }

    @Test func theProviderDeclaresTheKnownEvents() throws {
        let schema = try TraceSchema.provider(try String(contentsOf: Self.header, encoding: .utf8))
        // The parse itself: every event the toolkit documents, and the enumerations the vocabulary mirrors.
        #expect(Set(schema.events.keys) == ["dispatch_enqueue", "dispatch_begin", "dispatch_end", "updater_inline",
                                            "budget_exceeded", "interval_begin", "interval_end", "transition_begin",
                                            "transition_end", "store_ready", "listeners_notified"], "\(schema)")
        #expect(schema.events["dispatch_enqueue"]?.map(\.name) == ["id", "parent_id", "kind", "name", "queue", "queue_depth"])
        #expect(schema.enumerations["kind"] == [0: "state_updater", 1: "side_effect"])
        #expect(schema.enumerations["outcome"]?.count == 5 && schema.enumerations["queue"]?.count == 4, "\(schema)")
    }

    /// The flight recorder writes the provider's events, field for field, in its dumps' metadata.
    @Test func theFlightRecordersMetadataIsTheProviders() throws {
        let provider = try TraceSchema.provider(try String(contentsOf: Self.header, encoding: .utf8))
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("katana-schema-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        _ = try FlightRecorder.shared.dump(to: folder.path)
        let metadata = try String(contentsOf: folder.appendingPathComponent("metadata"), encoding: .utf8)
        let written = TraceSchema.metadata(metadata)
        #expect(written == provider, "the flight recorder's metadata: \(written)\nthe provider: \(provider)")
    }

    /// The Swift vocabulary's enumerations are the provider's: the same raw values, the same labels.
    @Test func theSwiftVocabularyIsTheProviders() throws {
        let provider = try TraceSchema.provider(try String(contentsOf: Self.header, encoding: .utf8))
        func labels<E: CaseIterable & RawRepresentable & CustomStringConvertible>(_: E.Type) -> [UInt8: String] where E.RawValue == UInt8 {
            Dictionary(uniqueKeysWithValues: E.allCases.map { ($0.rawValue, $0.description) })
        }
        #expect(labels(DispatchKind.self) == provider.enumerations["kind"])
        #expect(labels(DispatchRoute.self) == provider.enumerations["queue"])
        #expect(labels(DispatchOutcome.self) == provider.enumerations["outcome"])
    }

    /// The readers' and the inspector's tables name only the provider's events, and ask only for fields those events
    /// carry: the C reader's roles, the babeltrace2 reader's roles and their fields, the inspector's event names.
    @Test func theReadersTablesNameTheProvidersEventsAndFields() throws {
        let provider = try TraceSchema.provider(try String(contentsOf: Self.header, encoding: .utf8))
        let context: Set<String> = ["vpid", "vtid", "procname"]

        let cReader = try Self.source("Sources/CKatanaCTF/katana_ctf.c")
        let cRoles = Set(cReader.matches(of: /strcmp\(e, "(\w+)"\) == 0\) ec->role/).map { String($0.1) })
        #expect(cRoles.count >= 9 && cRoles.isSubset(of: provider.events.keys), "\(cRoles.subtracting(provider.events.keys))")

        let bt2 = try Self.source("Sources/KatanaTraceToolkit/Babeltrace2Reader.swift")
        var keys: [String: String] = [:]
        for match in bt2.matches(of: /case \.(\w+): "(\w+)"/) { keys[String(match.1)] = String(match.2) }
        let roles = bt2.matches(of: /"(\w+)": \(\.\w+, \[([^\]]*)\]\)/)
        #expect(roles.count >= 9)
        for role in roles {
            let event = String(role.1)
            let carried = Set((provider.events[event] ?? []).map(\.name)).union(context)
            #expect(provider.events[event] != nil, "the babeltrace2 reader knows \(event), which the provider does not declare")
            for field in role.2.split(separator: ",") {
                let key = try #require(keys[field.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: ".", with: "")])
                #expect(carried.contains(key), "the babeltrace2 reader reads \(key) from \(event), which does not carry it")
            }
        }

        let inspector = try Self.source("Sources/KatanaInspector/Inspector.swift")
        let named = Set(inspector.matches(of: /\(\.\w+, "(\w+)"\)/).map { String($0.1) })
        #expect(named == Set(provider.events.keys), "the inspector's names: \(named.symmetricDifference(provider.events.keys))")
    }
}
