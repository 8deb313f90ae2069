/// Upload queues (`uploads.jsonl`) as a board leaves them, for tests of what reads them.
public enum UploadQueues {
    /// A queue of about `bytes` for camera `camera`: clips queued, uploaded and deleted on the
    /// board over and over (a board that uploaded for years and was never restarted), then
    /// `waiting` clips that wait (none of them on any board).
    public static func large(bytes: Int, camera: String, waiting: Int = 20) -> [UInt8] {
        var text: [UInt8] = []
        text.reserveCapacity(bytes + 4096)
        func line(_ body: String) { text += Array(("{\"at\":\"2026-01-01T00:00:00.000Z\"," + body + "}\n").utf8) }
        var index = 0
        while text.count < bytes {
            let file = "2025-\(index / 100_000)/\(camera)-\(index).mov"
            line("\"queued\":\"\(file)\"")
            line(
                "\"bytes\":1000,\"seconds\":0.5,\"uploaded\":\"\(file)\",\"url\":\"s3://clips/fleet/\(camera)/\(file)\""
            )
            line("\"deleted\":\"\(file)\",\"reason\":\"older than 30 days\"")
            index += 1
        }
        for i in 0..<waiting { line("\"queued\":\"2025-12/\(camera)-waiting-\(i).mov\"") }
        return text
    }
}
