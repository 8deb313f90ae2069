import Agent
import Configuration
import Logging
import Media
import ONVIF
import POSIX
import Synchronization

/// WS-Discovery for the camera (`onvif.discovery`): on a thread of its own (`discovery`), it
/// answers each Probe that asks for a camera like this one with a ProbeMatch sent back to the
/// one who asked, whose XAddrs is the device service at the address of the interface the probe
/// came in on; it says Hello when the agent's run starts and Bye when it stops (the stop's step
/// 5, with the other sinks).
///
/// Where: when `web.listen` serves other machines, on every interface (UDP `port`, multicast
/// 239.255.255.250 joined on each interface that can take it); else on 127.0.0.1 alone (a
/// probe sent there, from this machine), with no Hello or Bye (no other machine could reach
/// the services it would announce). Bounded: a datagram over `datagramLimit` bytes is dropped
/// unread, one that is no Probe (or not XML) is dropped, and at most `answersPerSecond` probes
/// are answered a second (a burst of as many), the rest dropped and counted: a flood costs a
/// parse each, never a send.
public final class ONVIFDiscovery: EventSink {
    public static let group: [UInt8] = [239, 255, 255, 250]
    public static let datagramLimit = 16 * 1024
    public static let answersPerSecond = 20.0

    let socket: MulticastSocket
    let device: ONVIFDevice
    let webPort: Int
    /// `web.listen` when it names one address (a loopback one too, IPv6 or not): the XAddrs'
    /// host whatever interface a probe came in on; nil for every IPv4 address (0.0.0.0). (The
    /// web server on every IPv6 address, `::`, takes no IPv4 client: no discovery then.)
    let fixedHost: String?
    let announces: Bool
    let log: Logger
    let clock: Clock
    /// This run's number in every message's AppSequence (seconds since 1970 at start, as
    /// WS-Discovery asks: larger at each start), and the messages' count.
    let instance: UInt32
    let sent = Atomic<UInt32>(0)
    let thread = Mutex<JoinableThread?>(nil)
    let finished = Atomic<Bool>(false)
    struct Budget {
        var tokens = ONVIFDiscovery.answersPerSecond
        var last: Double?
        var dropped = 0
    }
    let budget = Mutex(Budget())

    /// The socket for `device`, whose web server listens on `listen` and `webPort`; WS-Discovery
    /// on UDP `port`.
    public init(
        device: ONVIFDevice, listen: String, webPort: Int, port: Int, log: Logger, clock: Clock = .monotonic
    )
        throws(SystemError)
    {
        announces = !Settings.Web.isLoopback(listen)
        let interfaces = announces ? MulticastSocket.interfaceAddresses() : []
        socket = try MulticastSocket(
            address: announces ? [0, 0, 0, 0] : [127, 0, 0, 1], port: port, group: announces ? Self.group : nil,
            interfaces: interfaces)
        self.device = device
        self.webPort = webPort
        fixedHost = listen == "0.0.0.0" ? nil : listen
        self.log = log
        self.clock = clock
        instance = UInt32(truncatingIfNeeded: max(1, WallClock.now().seconds))
        log.info(
            "onvif discovery listening",
            [
                ("port", .int(port)),
                ("interfaces", .string(socket.joined.map(NumericAddress.text).joined(separator: " "))),
                ("reach", .string(announces ? "every interface" : "this machine only (web.listen is loopback)")),
                ("endpoint", .string(device.endpoint)),
            ])
    }

    /// The device service's address through `host`.
    func xaddr(_ host: [UInt8]) -> String {
        let shown = fixedHost ?? (host == [0, 0, 0, 0] || host.count != 4 ? "127.0.0.1" : NumericAddress.text(host))
        return device.deviceService(TCPListener.endpoint(shown, webPort))
    }

    func nextMessage() -> UInt32 { sent.add(1, ordering: .relaxed).newValue }

    public func start(_ context: SinkContext) {
        hello(socket.joined)
        let started = startThread("discovery") { [self] in serve() }
        thread.withLock { $0 = started }
    }

    /// Hello on each of `interfaces` (when it announces).
    func hello(_ interfaces: [[UInt8]]) {
        guard announces else { return }
        for interface in interfaces {
            let hello = DiscoveryMessage.hello(
                device: device, xaddr: xaddr(interface), instance: instance, message: nextMessage())
            send(hello, to: Self.group, port: try? socket.localPort(), interface: interface, what: "hello")
        }
    }

    /// How often the interfaces are looked at again: one that came up after the start (the
    /// agent does not wait for the network) joins the group and is said Hello on.
    static let interfaceSeconds = 30.0

    public func handle(_ event: AgentEvent) {}

    /// Stops answering, then says Bye on every interface.
    public func finish() {
        guard !finished.exchange(true, ordering: .acquiringAndReleasing) else { return }
        socket.stop()
        _ = thread.withLock { $0 }?.join(timeout: 1)
        guard announces else { return }
        for interface in socket.joined {
            let bye = DiscoveryMessage.bye(device: device, instance: instance, message: nextMessage())
            send(bye, to: Self.group, port: try? socket.localPort(), interface: interface, what: "bye")
        }
    }

    /// The thread's loop: each datagram until `finish`, and the interfaces every
    /// `interfaceSeconds`.
    func serve() {
        var due = clock.now().seconds + Self.interfaceSeconds
        while true {
            switch socket.receive(limit: Self.datagramLimit, seconds: max(0, due - clock.now().seconds)) {
            case .stopped: return
            case .tooLong, .quiet: break
            case .datagram(let datagram): answer(datagram)
            }
            guard announces, clock.now().seconds >= due else { continue }
            due = clock.now().seconds + Self.interfaceSeconds
            let joined = socket.join(MulticastSocket.interfaceAddresses())
            if !joined.isEmpty {
                log.info(
                    "onvif discovery joined a new interface",
                    [("interfaces", .string(joined.map(NumericAddress.text).joined(separator: " ")))])
                hello(joined)
            }
        }
    }

    /// A ProbeMatch for a probe that asks for this camera, within the budget.
    func answer(_ datagram: MulticastSocket.Datagram) {
        guard let probe = DiscoveryProbe.parse(datagram.bytes), probe.matches(device) else { return }
        guard spend() else { return }
        let match = DiscoveryMessage.probeMatch(
            probe, device: device, xaddr: xaddr(datagram.local), instance: instance, message: nextMessage())
        send(match, to: datagram.from, port: datagram.port, interface: nil, what: "probe match")
    }

    /// Whether one more answer fits the budget now (a token bucket); the first refused of a
    /// flood is said.
    func spend() -> Bool {
        let now = clock.now().seconds
        let (allowed, firstDropped) = budget.withLock { b -> (Bool, Bool) in
            if let last = b.last {
                b.tokens = min(Self.answersPerSecond, b.tokens + (now - last) * Self.answersPerSecond)
            }
            b.last = now
            guard b.tokens >= 1 else {
                b.dropped += 1
                return (false, b.dropped == 1)
            }
            b.tokens -= 1
            if b.tokens >= Self.answersPerSecond - 1 { b.dropped = 0 }
            return (true, false)
        }
        if firstDropped {
            log.warning(
                "onvif discovery probes come faster than it answers: the rest are dropped — a client probing in a loop, or a flood",
                [("answers_per_second", .int(Int(Self.answersPerSecond)))])
        }
        return allowed
    }

    func send(_ bytes: [UInt8], to address: [UInt8], port: Int?, interface: [UInt8]?, what: String) {
        guard let port else { return }
        do { try socket.send(bytes, to: address, port: port, interface: interface) } catch {
            log.warning(
                "onvif discovery could not send: NVRs may not see the camera come or go — check the network",
                [
                    ("message", .string(what)), ("to", .string(NumericAddress.text(address))),
                    ("error", .string("\(error)")),
                ])
        }
    }
}
