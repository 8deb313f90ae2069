/// Rows of measurements against columns (picture sizes): printed as one aligned table and
/// written as JSON records, so later measurements (detection, the whole pipeline) are one
/// more `record` call.
struct BenchTable {
    struct Row {
        var measurement: String
        var unit: String
        var values: [String: Double] = [:]
        /// What the issue asks of the figure, printed in a last column when a row has one.
        var goal: String?
    }

    let columns: [String]
    private(set) var rows: [Row] = []

    init(columns: [String]) { self.columns = columns }

    mutating func record(_ measurement: String, unit: String, column: String, value: Double, goal: String? = nil) {
        precondition(columns.contains(column), "unknown column \(column)")
        if let i = rows.firstIndex(where: { $0.measurement == measurement && $0.unit == unit }) {
            rows[i].values[column] = value
        } else {
            rows.append(Row(measurement: measurement, unit: unit, values: [column: value], goal: goal))
        }
    }

    func render() -> String {
        let goals = rows.contains { $0.goal != nil }
        let header = ["measurement", "unit"] + columns + (goals ? ["goal"] : [])
        let body = rows.map { row in
            [row.measurement, row.unit] + columns.map { c in row.values[c].map(BenchTable.format) ?? "–" }
                + (goals ? [row.goal ?? ""] : [])
        }
        let widths = header.indices.map { i in ([header] + body).map { $0[i].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, cell in
                let pad = String(repeating: " ", count: widths[i] - cell.count)
                return i < 2 || (goals && i == header.count - 1) ? cell + pad : pad + cell
            }.joined(separator: "  ")
        }
        let rule = widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")
        return ([line(header), rule] + body.map(line)).joined(separator: "\n")
    }

    /// Three significant figures, without exponent notation.
    static func format(_ v: Double) -> String {
        guard v.isFinite else { return "–" }
        let magnitude = abs(v)
        let decimals = magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : magnitude >= 1 ? 2 : 3
        var scaled = (v * pow10(decimals)).rounded() / pow10(decimals)
        if scaled == 0 { scaled = 0 }
        var text = String(scaled)
        if decimals == 0, text.hasSuffix(".0") { text.removeLast(2) }
        if let dot = text.firstIndex(of: "."), decimals > 0 {
            let have = text.distance(from: dot, to: text.endIndex) - 1
            if have < decimals { text += String(repeating: "0", count: decimals - have) }
        }
        return text
    }

    private static func pow10(_ n: Int) -> Double { (0..<n).reduce(1.0) { r, _ in r * 10 } }
}
