import Foundation
import TestSupport
import Testing

/// docs/reference/commands.md against the program, as packaging/check-man-pages.sh holds
/// vigil(8): a `## \`vigil NAME\`` section for every command `vigil --help` lists and for no
/// other, each with a table of exactly the options `vigil NAME --help` lists (but `--help`).
@Suite struct CommandsDocumentTests {
    static let document = "docs/reference/commands.md"

    /// The first words of the indented lines under `title:` in a help text.
    static func listed(_ help: String, under title: String) -> [String] {
        let lines = help.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(of: Substring(title)) else { return [] }
        return lines[(start + 1)...].prefix { $0.hasPrefix("  ") }.compactMap {
            $0.split(separator: " ").first.map(String.init)
        }
    }

    @Test func everyCommandHasASectionWithItsOptions() throws {
        let help = try vigil("--help")
        #expect(help.status == 0, "\(help.stderr)")
        let commands = Self.listed(help.stdout, under: "commands:")
        #expect(commands.count >= 8, "\(help.stdout)")
        let text = try repositoryText(Self.document)
        let sections = text.split(separator: "\n").filter { $0.hasPrefix("## `vigil ") }.map {
            String($0.dropFirst("## `vigil ".count).prefix { $0 != "`" })
        }
        #expect(
            Set(sections) == Set(commands),
            "\(Self.document) has sections for \(sections.sorted()), vigil --help lists \(commands.sorted()): one section per command"
        )
        for command in commands {
            let usage = try vigil(command, "--help")
            #expect(usage.status == 0, "\(command): \(usage.stderr)")
            let options = Self.listed(usage.stdout, under: "options:").filter { $0 != "--help" }
            let table = try #require(
                markdownTable(in: text, under: "## `vigil \(command)`"), "\(Self.document): no section for \(command)")
            let documented = table.compactMap { row -> String? in
                guard let cell = row.first, cell.hasPrefix("`--") else { return nil }
                return String(cell.dropFirst().prefix { $0 != " " && $0 != "`" })
            }
            #expect(
                Set(documented) == Set(options),
                "\(Self.document): vigil \(command)'s table lists \(documented.sorted()), vigil \(command) --help \(options.sorted())"
            )
        }
    }
}
