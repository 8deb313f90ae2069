import TestSupport
import Testing

@testable import Configuration

/// docs/reference/settings.md against `ConfigSchema`, which owns the keys: under a heading per
/// section, one row per key, in the schema's order, with what it accepts, its default and its
/// summary exactly as the schema has them — so the page is the schema, and a key added, changed
/// or removed there fails here with the row to write.
@Suite struct SettingsDocumentTests {
    static let document = "docs/reference/settings.md"

    /// The row the page has for `key`: its name, what it accepts (and its unit), its default and
    /// its summary (its `<` written `&lt;`, so that `<camera.name>` is not taken for a tag).
    static func row(_ key: ConfigKey) -> [String] {
        [
            "`\(key.name)`", key.accepted + (key.unit.map { ", in \($0)" } ?? ""), "`\(key.defaultValue)`",
            key.summary.replacing("<", with: "&lt;"),
        ]
    }

    /// `row` as the page writes it (a `|` in a cell escaped).
    static func line(_ key: ConfigKey) -> String {
        "| " + row(key).map { $0.replacing("|", with: "\\|") }.joined(separator: " | ") + " |"
    }

    @Test func everySettingIsDocumentedAsTheSchemaHasIt() throws {
        let text = try repositoryText(Self.document)
        let headings = text.split(separator: "\n").filter { $0.hasPrefix("## `") }.map(String.init)
        #expect(
            headings == ConfigSchema.sections.map { "## `\($0)`" },
            "\(Self.document)'s sections are \(headings), the schema's \(ConfigSchema.sections)")
        for section in ConfigSchema.sections {
            let table = try #require(
                markdownTable(in: text, under: "## `\(section)`"), "\(Self.document) has no section \(section)")
            let keys = ConfigSchema.keys.filter { $0.section == section }
            #expect(
                table.map { $0.first ?? "" } == keys.map { "`\($0.name)`" },
                "\(Self.document): the keys of \(section) are not the schema's, in its order")
            for key in keys {
                let documented = table.first { $0.first == "`\(key.name)`" }
                #expect(documented == Self.row(key), "\(Self.document): \(key.name)'s row should be\n\(Self.line(key))")
            }
        }
    }
}
