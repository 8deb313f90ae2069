import Media

/// The namespaces ONVIF's messages are written in.
public enum Namespace {
    public static let soap12 = "http://www.w3.org/2003/05/soap-envelope"
    public static let soap11 = "http://schemas.xmlsoap.org/soap/envelope/"
    public static let device = "http://www.onvif.org/ver10/device/wsdl"
    public static let media = "http://www.onvif.org/ver10/media/wsdl"
    public static let schema = "http://www.onvif.org/ver10/schema"
    public static let error = "http://www.onvif.org/ver10/error"
    public static let network = "http://www.onvif.org/ver10/network/wsdl"
    public static let security =
        "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd"
    public static let utility =
        "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd"
    public static let discovery = "http://schemas.xmlsoap.org/ws/2005/04/discovery"
    public static let addressing = "http://schemas.xmlsoap.org/ws/2004/08/addressing"
}

/// A SOAP request (1.2, as ONVIF's bindings are; 1.1 is read too): its header and the
/// operation its body holds.
public struct SOAPRequest: Sendable, Equatable {
    public let header: XMLElement?
    /// The body's first element: what is asked (`GetProfiles`), with its arguments.
    public let operation: XMLElement

    /// Reads `bytes` as a SOAP envelope; nil with why when it is not one.
    public static func parse(
        _ bytes: [UInt8], limits: XMLReader.Limits = XMLReader.Limits()
    ) -> Result<
        SOAPRequest, SOAPProblem
    > {
        let root: XMLElement
        do { root = try XMLReader.parse(bytes, limits: limits) } catch { return .failure(.notXML(error)) }
        guard root.name == "Envelope", root.namespace == Namespace.soap12 || root.namespace == Namespace.soap11 else {
            return .failure(.notAnEnvelope)
        }
        guard let body = root.child("Body", namespace: root.namespace), let operation = body.children.first else {
            return .failure(.noOperation)
        }
        return .success(SOAPRequest(header: root.child("Header", namespace: root.namespace), operation: operation))
    }

    /// The WS-Security UsernameToken of its header, if it has one.
    public var usernameToken: UsernameToken? { UsernameToken(header: header) }
}

/// Why a request was not read as SOAP.
public enum SOAPProblem: Error, Equatable, Sendable, CustomStringConvertible {
    case notXML(XMLError)
    case notAnEnvelope
    case noOperation

    public var description: String {
        switch self {
        case .notXML(let error): error.description
        case .notAnEnvelope: "the XML is not a SOAP envelope"
        case .noOperation: "the SOAP body holds no operation"
        }
    }
}

/// WS-Security's UsernameToken (OASIS UsernameToken Profile 1.0), as ONVIF clients send it.
public struct UsernameToken: Sendable, Equatable {
    public enum Password: Sendable, Equatable {
        /// The password itself (`#PasswordText`, or no type).
        case text(String)
        /// Base64(SHA-1(nonce + created + password)) (`#PasswordDigest`).
        case digest(String)
    }

    public let username: String
    public let password: Password
    /// `Created`, as written (ISO 8601).
    public let created: String?
    /// `Nonce`, as written (Base64).
    public let nonce: String?

    /// The token in `header`'s `Security` element (matched by local names: clients differ in
    /// prefixes and in the utility namespace's version); nil without one, or with no user name
    /// (what a client given no user sends).
    public init?(header: XMLElement?) {
        guard let token = header?.child("Security")?.child("UsernameToken"),
            let username = token.child("Username")?.trimmedText, !username.isEmpty
        else { return nil }
        self.username = username
        let given = token.child("Password")
        let value = given?.trimmedText ?? ""
        password = given?.attribute("Type")?.hasSuffix("#PasswordDigest") == true ? .digest(value) : .text(value)
        created = token.child("Created")?.trimmedText
        nonce = token.child("Nonce")?.trimmedText
    }

    public init(username: String, password: Password, created: String?, nonce: String? = nil) {
        self.username = username
        self.password = password
        self.created = created
        self.nonce = nonce
    }

    /// What the token proves against the users of the web's password file (`users`:
    /// `MD5(user:realm:password)` of each, never a password) and of `onvif.password_file`
    /// (`clear`: the passwords themselves; nil without that file). A `PasswordText` signs in
    /// when it matches either; a `PasswordDigest` only against `clear` (it hashes the password
    /// itself), with its `Nonce` and `Created`, the nonce never taken twice (`nonces`). A token
    /// whose `Created` is more than `window` seconds from `now` (seconds since 1970, UTC) is
    /// refused as a replay, whatever it holds. Compared in constant time.
    public func check(
        users: [String: [UInt8]], realm: String, clear: [String: String]? = nil, nonces: inout NonceMemory,
        now: Double, window: Double = 300
    ) -> TokenCheck {
        var createdSeconds: Double?
        if let created {
            guard let seconds = ISO8601.seconds(created), abs(seconds - now) <= window else {
                return .stale(username)
            }
            createdSeconds = seconds
        }
        switch password {
        case .digest(let digest):
            guard let clear else { return .digestCannotBeChecked(username) }
            guard let created, let createdSeconds, let nonce, !nonce.isEmpty else { return .replayed(username) }
            // An unknown user is compared against a password all the same (no faster answer).
            let known = clear[username]
            let matches = PasswordDigest.matches(digest, nonce: nonce, created: created, password: known ?? "")
            guard matches, known != nil else { return .wrongPassword(username) }
            switch nonces.take(nonce, user: username, until: createdSeconds + window, now: now) {
            case .new: return .signedIn(username)
            case .replayed, .full: return .replayed(username)
            }
        case .text(let password):
            var matched = false
            if let known = users[username] {
                let given = MD5.digest(Array("\(username):\(realm):\(password)".utf8))
                matched = ConstantTime.equal(given, known)
            }
            if let known = clear?[username], ConstantTime.equal(Array(password.utf8), Array(known.utf8)) {
                matched = true
            }
            return matched ? .signedIn(username) : .wrongPassword(username)
        }
    }

    /// `check` with the web's password file alone (no PasswordDigest can be checked).
    public func check(users: [String: [UInt8]], realm: String, now: Double, window: Double = 300) -> TokenCheck {
        var nonces = NonceMemory()
        return check(users: users, realm: realm, clear: nil, nonces: &nonces, now: now, window: window)
    }
}

/// What a UsernameToken proved.
public enum TokenCheck: Sendable, Equatable {
    case signedIn(String)
    /// An unknown user, or a wrong password: a failed sign-in.
    case wrongPassword(String)
    /// `Created` far from this clock (or not a date): a replay, or a client whose clock is wrong.
    case stale(String)
    /// A PasswordDigest whose Nonce was taken before (a replay), or without a Nonce or Created.
    case replayed(String)
    /// A PasswordDigest without `onvif.password_file`: the web's hashes cannot check it.
    case digestCannotBeChecked(String)
}

/// ISO 8601 dates as XML Schema's `dateTime` writes them, to and from seconds since 1970 (UTC).
public enum ISO8601 {
    /// `YYYY-MM-DDTHH:MM:SS[.fraction][Z|±HH:MM]` (no zone: UTC); nil for anything else.
    public static func seconds(_ text: String) -> Double? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 19, bytes.count <= 40, bytes[4] == 0x2D, bytes[7] == 0x2D,
            bytes[10] == 0x54 || bytes[10] == 0x74, bytes[13] == 0x3A, bytes[16] == 0x3A
        else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard (0x30...0x39).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var at = 19
        var fraction = 0.0
        if at < bytes.count, bytes[at] == 0x2E {
            at += 1
            var scale = 0.1
            let start = at
            while at < bytes.count, (0x30...0x39).contains(bytes[at]) {
                fraction += Double(bytes[at] - 0x30) * scale
                scale /= 10
                at += 1
            }
            guard at > start else { return nil }
        }
        var offset = 0
        if at < bytes.count {
            if bytes[at] == 0x5A || bytes[at] == 0x7A {
                at += 1
            } else if bytes[at] == 0x2B || bytes[at] == 0x2D, bytes.count - at == 6, bytes[at + 3] == 0x3A,
                let h = number((at + 1)..<(at + 3)), let m = number((at + 4)..<(at + 6)), h < 24, m < 60
            {
                offset = (h * 3600 + m * 60) * (bytes[at] == 0x2B ? 1 : -1)
                at += 6
            } else {
                return nil
            }
        }
        guard at == bytes.count else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Double(days * 86400 + hour * 3600 + minute * 60 + second - offset) + fraction
    }

    /// The UTC calendar fields of `seconds` since 1970.
    public static func fields(
        _ seconds: Double
    ) -> (year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) {
        let whole = Int(seconds.rounded(.down))
        let days = whole >= 0 ? whole / 86400 : (whole - 86399) / 86400
        let rest = whole - days * 86400
        let (year, month, day) = civilFromDays(days)
        return (year, month, day, rest / 3600, rest % 3600 / 60, rest % 60)
    }

    /// `seconds` since 1970 written `YYYY-MM-DDTHH:MM:SSZ`.
    public static func text(_ seconds: Double) -> String {
        let f = fields(seconds)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(f.year)-\(two(f.month))-\(two(f.day))T\(two(f.hour)):\(two(f.minute)):\(two(f.second))Z"
    }

    /// Days since 1970-01-01 of a date of the proleptic Gregorian calendar (H. Hinnant's).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146097 + dayOfEra - 719468
    }

    static func civilFromDays(_ days: Int) -> (Int, Int, Int) {
        let z = days + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let dayOfEra = z - era * 146097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
