import POSIX

/// A client's address as the sign-in throttle counts it: an IPv4 address whole, an IPv6 one by
/// its /64 (one home, one phone's network: whoever holds one address of it holds them all).
package struct ClientAddress: Hashable, Sendable {
    /// The address's bytes: 4 (IPv4) or 16 (IPv6).
    let bytes: [UInt8]

    package init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        // An IPv4 address mapped into IPv6 (::ffff:a.b.c.d) is that IPv4 address.
        if bytes.count == 16, bytes.prefix(10).allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
            self.bytes = Array(bytes.suffix(4))
        } else {
            self.bytes = bytes
        }
    }

    /// What the throttle counts by.
    var group: [UInt8] { bytes.count == 4 ? bytes : Array(bytes.prefix(8)) + Array(repeating: 0, count: 8) }

    /// The group, written: `192.0.2.7`, or `2001:db8:1:2::/64`.
    package var groupText: String {
        bytes.count == 4 ? NumericAddress.text(bytes) : NumericAddress.text(group) + "/64"
    }
}

/// Failed sign-ins counted per client address (its `ClientAddress.group`), and how long an
/// address that failed too often waits before anything it sends is looked at again: after
/// `Rules.failures` failures, `firstWait`, doubled with each failure after that, up to
/// `longestWait`. A success ends it; an address with no failure for `forgetAfter` starts anew.
/// At most `Rules.addresses` addresses are kept: a new one pushes out the one whose last
/// failure is the oldest. A value: the server holds it under a lock, the clock is the caller's.
package struct SignInThrottle: Sendable {
    package struct Rules: Sendable {
        var failures = 5
        var firstWait = 1.0
        var longestWait = 300.0
        var forgetAfter = 900.0
        var addresses = 1024

        package init() {}
    }

    struct Record: Sendable {
        var failures = 0
        var last = 0.0
        /// Nothing from the address is looked at before this.
        var until = 0.0
    }

    /// An address starts being slowed: said once per burst.
    package struct Slowed: Equatable, Sendable {
        package let failures: Int
        package let wait: Double
    }

    let rules: Rules
    private(set) var records: [[UInt8]: Record] = [:]

    package init(rules: Rules = Rules()) { self.rules = rules }

    /// How many seconds `address` still waits at `now`; nil when it may try.
    package func wait(for address: ClientAddress, at now: Double) -> Double? {
        guard let record = records[address.group], record.until > now else { return nil }
        return record.until - now
    }

    /// `address` failed to sign in at `now`: what to say when this failure starts a wait.
    package mutating func failed(_ address: ClientAddress, at now: Double) -> Slowed? {
        let key = address.group
        var record = records[key] ?? Record()
        if now - record.last > rules.forgetAfter { record = Record() }
        if records[key] == nil { makeRoom(at: now) }
        record.failures += 1
        record.last = now
        var slowed: Slowed?
        if record.failures >= rules.failures {
            let doublings = min(record.failures - rules.failures, 30)
            let wait = min(rules.firstWait * Double(1 << doublings), rules.longestWait)
            record.until = now + wait
            if record.failures == rules.failures { slowed = Slowed(failures: record.failures, wait: wait) }
        }
        records[key] = record
        return slowed
    }

    /// `address` signed in: its count ends. How many failures it had when it was being slowed
    /// (the end of a burst, said once); nil when it was not.
    package mutating func succeeded(_ address: ClientAddress) -> Int? {
        guard let record = records.removeValue(forKey: address.group) else { return nil }
        return record.failures >= rules.failures ? record.failures : nil
    }

    /// Room for one more address: the forgotten ones go, then the one failed longest ago.
    private mutating func makeRoom(at now: Double) {
        guard records.count >= rules.addresses else { return }
        records = records.filter { now - $0.value.last <= rules.forgetAfter }
        if records.count >= rules.addresses, let oldest = records.min(by: { $0.value.last < $1.value.last }) {
            records.removeValue(forKey: oldest.key)
        }
    }
}
