import Foundation
import TestSupport
import Testing

/// scripts/apt-install.sh, the one way the scripts install Debian packages, with apt-get,
/// dpkg-query and sudo stood in for: what it asks apt for, and when.
@Suite struct AptInstallTests {
    static let helper = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("scripts/apt-install.sh").path

    /// Stand-ins in a directory put first on PATH: dpkg-query knows the packages in
    /// `installed`; apt-get writes each call to `calls`, and its `install` fails until an
    /// `update` when `stale` (package lists too old); sudo writes "sudo" and runs the rest.
    /// `broken`: every `install` fails (a package apt does not know).
    static func run(
        _ script: String, installed: [String], stale: Bool, broken: Bool = false
    ) throws -> (ToolResult, [String]) {
        let dir = try TemporaryDirectory("vigil-apt")
        defer { dir.remove() }
        let stubs: [(String, String)] = [
            (
                "dpkg-query",
                "for p in \(installed.joined(separator: " ")); do [ \"$p\" = \"$3\" ] && { echo 'install ok installed'; exit 0; }; done; exit 1"
            ),
            (
                "apt-get",
                "echo \"apt-get $*\" >> \(dir.file("calls")); case $1 in update) rm -f \(dir.file("stale")); echo 'Reading package lists';; install) [ ! -e \(dir.file("broken")) ] || { echo 'E: Unable to locate package foo'; exit 100; }; [ ! -e \(dir.file("stale")) ] || { echo 'E: Unable to fetch'; exit 100; };; esac"
            ),
            ("sudo", "echo sudo >> \(dir.file("calls")); exec \"$@\""),
            ("id", "echo 1000"),
        ]
        for (name, body) in stubs {
            try ("#!/bin/sh\n" + body + "\n").write(toFile: dir.file(name), atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: dir.file(name))
        }
        if stale { FileManager.default.createFile(atPath: dir.file("stale"), contents: Data()) }
        if broken { FileManager.default.createFile(atPath: dir.file("broken"), contents: Data()) }
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = dir.path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["LOG"] = dir.file("apt.log")
        let result = try runTool("bash", ["-c", ". '\(helper)'; " + script], environment: environment)
        let calls = (try? String(contentsOfFile: dir.file("calls"), encoding: .utf8)) ?? ""
        return (result, calls.split(separator: "\n").map(String.init))
    }

    @Test func onlyWhatIsMissingIsInstalledWithoutQuestions() throws {
        let (result, calls) = try Self.run("apt_ensure demo bash foo bar", installed: ["bash"], stale: false)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("demo: installing foo bar"), "\(result.stderr)")
        #expect(calls == ["sudo", "apt-get install -y -q --no-install-recommends foo bar"], "\(calls)")
    }

    @Test func nothingMissingAsksNothing() throws {
        let (result, calls) = try Self.run("apt_ensure demo bash", installed: ["bash"], stale: false)
        #expect(result.status == 0 && result.stderr.isEmpty && calls.isEmpty, "\(result.stderr) \(calls)")
    }

    /// Old package lists: read anew, then the install once more.
    @Test func staleListsAreReadAnewAndTheInstallTriedAgain() throws {
        let (result, calls) = try Self.run("apt_install foo", installed: [], stale: true)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            calls.filter { $0 != "sudo" } == [
                "apt-get install -y -q --no-install-recommends foo", "apt-get update -q",
                "apt-get install -y -q --no-install-recommends foo",
            ], "\(calls)")
    }

    /// With APT_LOG, apt's words go to the file, and its end is shown when the install fails.
    @Test func aFailureShowsTheLogsEnd() throws {
        let (result, calls) = try Self.run(
            "APT_LOG=$LOG apt_install foo; echo status=$?", installed: [], stale: false, broken: true)
        #expect(result.stdout == "status=1\n", "\(result.stdout)")
        #expect(result.stderr.contains("E: Unable to locate package foo"), "\(result.stderr)")
        #expect(calls.filter { $0 != "sudo" }.count == 3, "\(calls)")
    }
}
