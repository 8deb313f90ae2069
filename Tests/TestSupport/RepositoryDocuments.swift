import Foundation

/// The repository's documents as the tests that hold them to the code read them: a file by its
/// path in the repository, and the tables of a Markdown page.

/// The path of `relative` in this repository (found from this file's place in it).
public func repositoryPath(_ relative: String) -> String {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    return root.appendingPathComponent(relative).path
}

/// The text of the file at `relative` in this repository.
public func repositoryText(_ relative: String) throws -> String {
    try String(contentsOfFile: repositoryPath(relative), encoding: .utf8)
}

/// The body rows of the first Markdown table after the line `heading` (and before the next
/// heading), each its cells trimmed, in order; nil when there is no such heading. The header row
/// and the line under it are not rows; `\|` inside a cell is a `|` of the cell's text.
public func markdownTable(in text: String, under heading: String) -> [[String]]? {
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    guard let start = lines.firstIndex(where: { $0 == heading }) else { return nil }
    var table: [Substring] = []
    for line in lines[(start + 1)...] {
        if line.hasPrefix("#") { break }
        if line.hasPrefix("|") {
            table.append(line)
        } else if !table.isEmpty {
            break
        }
    }
    return table.dropFirst(2).map(markdownCells)
}

/// The cells of one table row: `| a | b \| c |` is ["a", "b | c"].
func markdownCells(_ row: Substring) -> [String] {
    var cells: [String] = []
    var cell = ""
    var escaped = false
    for character in row.dropFirst() {
        if escaped {
            cell.append(character == "|" ? "|" : "\\\(character)")
            escaped = false
        } else if character == "\\" {
            escaped = true
        } else if character == "|" {
            cells.append(cell.trimmingCharacters(in: .whitespaces))
            cell = ""
        } else {
            cell.append(character)
        }
    }
    if !cell.trimmingCharacters(in: .whitespaces).isEmpty { cells.append(cell.trimmingCharacters(in: .whitespaces)) }
    return cells
}
