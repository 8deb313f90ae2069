import Foundation
import TestSupport
import Testing

/// WS-Discovery from the real agent, against wsdiscovery's own messages: a probe answered with
/// where the device service is; malformed, oversized and foreign datagrams ignored, a flood
/// answered only so fast, the recording untouched; Hello at start and Bye at stop heard by a
/// listener in the multicast group. Each agent on a discovery port of its own
/// (`onvif.discovery_port`): 3702 is every client's, and tests run side by side.
@Suite(.enabled(if: ONVIFClient.required, "scripts/test-servers.sh's clients are not installed (make test does it)"))
struct ONVIFDiscoveryCommandTests {
    /// The WS-Discovery listener (`ONVIFClient`'s `listen`), run as `executable` with
    /// `arguments`, and the lines it prints.
    static func listen(_ executable: String, _ arguments: [String]) throws -> (Process, LineReader) {
        let listener = Process()
        listener.executableURL = URL(fileURLWithPath: executable)
        listener.arguments = arguments
        let pipe = Pipe()
        listener.standardOutput = pipe
        listener.standardError = FileHandle.nullDevice
        try listener.run()
        return (listener, LineReader(pipe.fileHandleForReading))
    }

    /// A UDP port nothing is bound to now.
    static func freeUDPPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { throw ONVIFClient.Failure(description: "no free UDP port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// The frames the agent has encoded, from `/metrics`.
    static func framesEncoded(_ web: Int) throws -> Int {
        let r = try runTool("curl", ["-sS", "--max-time", "20", "http://127.0.0.1:\(web)/metrics"])
        let line = r.stdout.split(separator: "\n").first { $0.hasPrefix("vigil_frames_encoded_total") }
        return line.flatMap { $0.split(separator: " ").last }.flatMap { Int($0) } ?? -1
    }

    @Test func aProbeIsAnsweredWithTheDeviceServiceAndWhatIsNotAProbeIsIgnored() throws {
        let dir = try TemporaryDirectory("vigil-onvif-discovery")
        defer { dir.remove() }
        let port = try Self.freeUDPPort()
        let (agent, web, _) = try ONVIFCommandTests.agent(
            dir, extra: "onvif = { enabled = true; discovery_port = \(port); };")
        defer { agent.kill(SIGKILL) }
        #expect(agent.waitFor("msg=\"onvif discovery listening\"", timeout: 10)?.contains("this machine only") == true)

        // What is not a probe for a camera: noise, a DTD, a datagram past the limit, a SOAP
        // message of another kind, a probe for another type.
        let oversized = "<a>" + String(repeating: "x", count: 60_000) + "</a>"
        let foreign = """
            <s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope"><s:Body><m:GetProfiles xmlns:m="http://www.onvif.org/ver10/media/wsdl"/></s:Body></s:Envelope>
            """
        let otherType = """
            <s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope" xmlns:a="http://schemas.xmlsoap.org/ws/2004/08/addressing" xmlns:d="http://schemas.xmlsoap.org/ws/2005/04/discovery" xmlns:p="urn:printers"><s:Header><a:MessageID>urn:uuid:1</a:MessageID></s:Header><s:Body><d:Probe><d:Types>p:Printer</d:Types></d:Probe></s:Body></s:Envelope>
            """
        let bomb = "<?xml version=\"1.0\"?><!DOCTYPE l [<!ENTITY l \"lol\">]><l>&l;&l;</l>"
        for (index, junk) in ["\u{0}\u{1}garbage<<>>", bomb, oversized, foreign, otherType].enumerated() {
            let file = dir.file("junk\(index)")
            try junk.write(toFile: file, atomically: true, encoding: .utf8)
            _ = try ONVIFClient.run(["send", "127.0.0.1", "\(port)", file])
        }
        let match = try #require(try ONVIFClient.run(["probe", "127.0.0.1", "\(port)"]).first)
        #expect(match["action"] as? String == "ProbeMatches", "\(match)")
        #expect(match["xaddrs"] as? [String] == ["http://127.0.0.1:\(web)/onvif/device_service"], "\(match)")
        #expect((match["epr"] as? String)?.hasPrefix("urn:uuid:") == true)
        let scopes = match["scopes"] as? [String] ?? []
        #expect(scopes.contains("onvif://www.onvif.org/name/yard"), "\(scopes)")
        #expect(scopes.contains("onvif://www.onvif.org/Profile/Streaming"), "\(scopes)")

        // A flood of probes: answered only so fast (said once), and the recording goes on.
        let before = try Self.framesEncoded(web)
        let flood = try runTool(
            "timeout",
            [
                "-s", "KILL", "120", ONVIFClient.python, "-c",
                """
                import socket, time
                from wsdiscovery.actions.probe import constructProbe, createProbeMessage
                m = createProbeMessage(constructProbe([], []))
                m = m if isinstance(m, bytes) else m.encode()
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                for _ in range(500): s.sendto(m, ("127.0.0.1", \(port)))
                s.settimeout(2)
                n = 0
                try:
                    while True:
                        s.recvfrom(65536); n += 1
                except socket.timeout:
                    print(n)
                """,
            ])
        let answered = Int(flood.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        #expect(answered >= 1 && answered < 500, "\(flood.stdout) \(flood.stderr)")
        #expect(agent.waitFor("probes come faster than it answers", timeout: 10) != nil, "\(agent.output)")
        #expect(waitUntil(timeout: 60) { (try? Self.framesEncoded(web)) ?? 0 > before + 15 }, "the agent goes on")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
        #expect(!agent.output.contains("level=error"), "\(agent.output)")
    }

    /// A program that runs the command after it where no socket of the netlink family can be
    /// made (a seccomp filter: socket(AF_NETLINK, …) fails with EAFNOSUPPORT), as the packaged
    /// service's `RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6` has the agent run.
    static func withoutNetlink(_ dir: TemporaryDirectory) throws -> [String] {
        let source = dir.file("no-netlink.c"), program = dir.file("no-netlink")
        try """
        #include <errno.h>
        #include <linux/filter.h>
        #include <linux/seccomp.h>
        #include <stddef.h>
        #include <stdio.h>
        #include <sys/prctl.h>
        #include <sys/socket.h>
        #include <sys/syscall.h>
        #include <unistd.h>
        int main(int argc, char **argv) {
            struct sock_filter filter[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 0, 3),
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_NETLINK, 0, 1),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EAFNOSUPPORT),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
            };
            struct sock_fprog program = {sizeof filter / sizeof filter[0], filter};
            if (argc < 2 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
                perror("no-netlink");
                return 1;
            }
            execv(argv[1], argv + 1);
            perror("no-netlink: execv");
            return 1;
        }
        """.write(toFile: source, atomically: true, encoding: .utf8)
        let compiler = try #require(which("clang") ?? which("cc"), "no C compiler (the Swift toolchain has clang)")
        let built = try runTool(compiler, ["-o", program, source])
        try #require(built.status == 0, "\(built.stderr)")
        return [program]
    }

    /// With web.listen serving other machines (so a password file), the camera says Hello in
    /// the multicast group when the agent starts and Bye when it stops, with its endpoint and
    /// the device service at an interface's address — in the packaged service's sandbox too,
    /// where no netlink socket can be made (getifaddrs needs one: it found no interface there).
    @Test(arguments: [false, true])
    func helloAtStartAndByeAtStopAreHeardInTheGroup(sandboxed: Bool) throws {
        let dir = try TemporaryDirectory("vigil-onvif-hello")
        defer { dir.remove() }
        let port = try Self.freeUDPPort()
        let (listener, heard) = try Self.listen(ONVIFClient.python, [ONVIFClient.script, "listen", "\(port)", "120"])
        defer { listener.terminate() }
        #expect(waitUntil(timeout: 60) { heard.lines.contains { $0.contains("ready") } })
        let joined = heard.lines.first.map { ONVIFClient.parse($0) }?.first?["ready"] as? Int ?? 0
        try #require(joined > 0, "no interface here takes multicast: \(heard.lines)")

        let (agent, web, _) = try ONVIFCommandTests.agent(
            dir, web: "listen = \"0.0.0.0\";", extra: "onvif = { enabled = true; discovery_port = \(port); };",
            password: "pw", launcher: sandboxed ? try Self.withoutNetlink(dir) : [])
        defer { agent.kill(SIGKILL) }
        #expect(waitUntil(timeout: 60) { heard.lines.contains { $0.contains("\"Hello\"") } }, "\(heard.lines)")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
        #expect(waitUntil(timeout: 60) { heard.lines.contains { $0.contains("\"Bye\"") } }, "\(heard.lines)")
        let messages = heard.lines.flatMap(ONVIFClient.parse).filter { $0["action"] != nil }
        let hello = try #require(messages.first { $0["action"] as? String == "Hello" })
        let bye = try #require(messages.first { $0["action"] as? String == "Bye" })
        #expect(messages.firstIndex { $0["action"] as? String == "Hello" } == 0, "Hello first: \(messages)")
        #expect(hello["epr"] as? String == bye["epr"] as? String && (hello["epr"] as? String)?.isEmpty == false)
        let xaddrs = hello["xaddrs"] as? [String] ?? []
        #expect(
            xaddrs.count == 1 && xaddrs[0].hasSuffix(":\(web)/onvif/device_service")
                && !xaddrs[0].contains("127.0.0.1"), "\(hello)")
        #expect((hello["scopes"] as? [String])?.contains("onvif://www.onvif.org/name/yard") == true)
    }
}

/// The network comes up after the agent (its unit does not wait for it): in a network
/// namespace of its own (root: `unshare --net`), the agent starts with no interface, one is
/// made and brought up, and within `ONVIFDiscovery.interfaceSeconds` (30 s) the agent joins the
/// group there and says Hello on it.
@Suite(
    .enabled(if: ONVIFClient.required, "scripts/test-servers.sh's clients are not installed (make test does it)"),
    .enabled(if: getuid() == 0 && which("unshare") != nil && which("nsenter") != nil, "needs root, unshare, nsenter"))
struct ONVIFLateNetworkTests {
    @Test func anInterfaceThatComesUpLaterIsJoinedAndSaidHelloOn() throws {
        let dir = try TemporaryDirectory("vigil-onvif-late")
        defer { dir.remove() }
        let port = try ONVIFDiscoveryCommandTests.freeUDPPort()
        let (agent, _, _) = try ONVIFCommandTests.agent(
            dir, web: "listen = \"0.0.0.0\";", extra: "onvif = { enabled = true; discovery_port = \(port); };",
            password: "pw", launcher: ["/usr/bin/unshare", "--net", "--"])
        defer { agent.kill(SIGKILL) }
        let listening = try #require(agent.waitFor("msg=\"onvif discovery listening\"", timeout: 30))
        #expect(logValue(listening, "interfaces") == "", "no interface yet: \(listening)")
        let namespace = "--net=/proc/\(agent.pid)/ns/net"
        let made = try runTool(
            "nsenter",
            [
                namespace, "sh", "-c",
                "ip link set lo up && ip link add v0 type veth peer name v1 && ip addr add 10.77.0.1/24 dev v0 && ip addr add 10.77.0.2/24 dev v1 && ip link set v0 up && ip link set v1 up",
            ])
        try #require(made.status == 0, "\(made.stderr)")
        let (listener, heard) = try ONVIFDiscoveryCommandTests.listen(
            try #require(which("nsenter")),
            [namespace, ONVIFClient.python, ONVIFClient.script, "listen", "\(port)", "120"])
        defer { listener.terminate() }
        #expect(waitUntil(timeout: 60) { heard.lines.contains { $0.contains("ready") } })
        let joined = agent.waitFor("msg=\"onvif discovery joined a new interface\"", timeout: 90)
        #expect(joined?.contains("10.77.0.") == true, "\(agent.output)")
        #expect(waitUntil(timeout: 60) { heard.lines.contains { $0.contains("\"Hello\"") } }, "\(heard.lines)")
        let hello = heard.lines.flatMap(ONVIFClient.parse).first { $0["action"] as? String == "Hello" }
        #expect((hello?["xaddrs"] as? [String])?.first?.contains("10.77.0.") == true, "\(String(describing: hello))")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
    }
}
