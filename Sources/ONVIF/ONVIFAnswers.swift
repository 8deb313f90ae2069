import Media

/// The device service's and media service's operations that NVRs and Home Assistant call to
/// add a camera (ONVIF Core 2.x, Media ver10), answered from an `ONVIFDevice`; the events
/// service (a pull point for motion) is advertised beside them and answered by the web server,
/// which holds the subscriptions (`ONVIFEvents` builds its messages). No imaging, PTZ or
/// media2 service is advertised: a client that would try them finds none and goes on without.
extension ONVIFDevice {
    /// What a request reached at `authority` (the client's `Host`: the host and port it used)
    /// and `host` (that host alone) is answered, at `now` (seconds since 1970, UTC). Who may
    /// ask is not decided here (`ONVIFDevice.preAuthentication`).
    public func answer(
        _ request: SOAPRequest, service: ONVIFService, authority: String, host: String, now: Double
    )
        -> SOAPReply
    {
        let operation = request.operation
        guard operation.namespace == service.namespace else { return .actionNotSupported(operation.name) }
        switch (service, operation.name) {
        case (.device, "GetDeviceInformation"): return .envelope(deviceInformation)
        case (.device, "GetSystemDateAndTime"): return .envelope(systemDateAndTime(now))
        case (.device, "GetScopes"):
            let items = scopes.map {
                "<tds:Scopes><tt:ScopeDef>Fixed</tt:ScopeDef><tt:ScopeItem>\(MarkupText.escaped($0))</tt:ScopeItem></tds:Scopes>"
            }
            return .envelope("<tds:GetScopesResponse>\(items.joined())</tds:GetScopesResponse>")
        case (.device, "GetCapabilities"):
            let categories = operation.children.filter { $0.name == "Category" }.map(\.trimmedText)
            return capabilities(categories, authority: authority)
        case (.device, "GetServices"):
            let include = operation.child("IncludeCapability")?.trimmedText == "true"
            return .envelope(services(include, authority: authority))
        case (.device, "GetServiceCapabilities"):
            return .envelope(
                "<tds:GetServiceCapabilitiesResponse>\(deviceServiceCapabilities)</tds:GetServiceCapabilitiesResponse>")
        case (.device, "GetNetworkInterfaces"):
            // Home Assistant takes an interface's MAC address for the camera's identity when
            // there is one, and the serial number when this says "not implemented": the
            // cameras of one board share its interfaces, so only the serial names each.
            return .fault(
                "env:Receiver", ["ter:ActionNotSupported"],
                "GetNetworkInterfaces is not implemented: each camera of this board is named by its serial number, not by the board's network interfaces"
            )
        case (.media, "GetServiceCapabilities"):
            return .envelope(
                "<trt:GetServiceCapabilitiesResponse>\(mediaServiceCapabilities)</trt:GetServiceCapabilitiesResponse>")
        case (.media, "GetProfiles"):
            return .envelope("<trt:GetProfilesResponse>\(profile("trt:Profiles"))</trt:GetProfilesResponse>")
        case (.media, "GetProfile"):
            guard operation.child("ProfileToken")?.trimmedText == Self.profileToken else { return noProfile }
            return .envelope("<trt:GetProfileResponse>\(profile("trt:Profile"))</trt:GetProfileResponse>")
        case (.media, "GetStreamUri"):
            guard operation.child("ProfileToken").map({ $0.trimmedText == Self.profileToken }) ?? true else {
                return noProfile
            }
            return .envelope("<trt:GetStreamUriResponse>\(mediaURI(streamURI(host: host)))</trt:GetStreamUriResponse>")
        case (.media, "GetSnapshotUri"):
            guard operation.child("ProfileToken").map({ $0.trimmedText == Self.profileToken }) ?? true else {
                return noProfile
            }
            return .envelope(
                "<trt:GetSnapshotUriResponse>\(mediaURI(snapshotURI(authority)))</trt:GetSnapshotUriResponse>")
        case (.media, "GetVideoSources"):
            return .envelope(
                "<trt:GetVideoSourcesResponse><trt:VideoSources token=\"\(Self.sourceToken)\"><tt:Framerate>\(number(video.framesPerSecond))</tt:Framerate>\(resolution)</trt:VideoSources></trt:GetVideoSourcesResponse>"
            )
        case (.media, "GetVideoSourceConfigurations"):
            return .envelope(
                "<trt:GetVideoSourceConfigurationsResponse>\(sourceConfiguration("trt:Configurations"))</trt:GetVideoSourceConfigurationsResponse>"
            )
        case (.media, "GetVideoEncoderConfigurations"):
            return .envelope(
                "<trt:GetVideoEncoderConfigurationsResponse>\(encoderConfiguration("trt:Configurations"))</trt:GetVideoEncoderConfigurationsResponse>"
            )
        default:
            return .actionNotSupported(operation.name)
        }
    }

    /// The operations anyone may call, signed in or not (ONVIF Core's PRE_AUTH access class,
    /// of those answered here): the clock (so a client can correct its own before it signs in),
    /// and what services there are and where.
    public static func preAuthentication(_ request: SOAPRequest) -> Bool {
        let operation = request.operation
        switch operation.namespace {
        case Namespace.device:
            return [
                "GetSystemDateAndTime", "GetCapabilities", "GetServices", "GetServiceCapabilities", "GetWsdlUrl",
                "GetHostname", "GetEndpointReference",
            ].contains(operation.name)
        case Namespace.media, ONVIFEvents.namespace: return operation.name == "GetServiceCapabilities"
        default: return false
        }
    }

    static let profileToken = "main"
    static let sourceToken = "video_source"

    var deviceInformation: String {
        "<tds:GetDeviceInformationResponse><tds:Manufacturer>Vigil</tds:Manufacturer><tds:Model>Vigil \(MarkupText.escaped(hardware))</tds:Model><tds:FirmwareVersion>\(MarkupText.escaped(version))</tds:FirmwareVersion><tds:SerialNumber>\(serialNumber)</tds:SerialNumber><tds:HardwareId>\(MarkupText.escaped(hardware))</tds:HardwareId></tds:GetDeviceInformationResponse>"
    }

    func systemDateAndTime(_ now: Double) -> String {
        let t = ISO8601.fields(now)
        return
            "<tds:GetSystemDateAndTimeResponse><tds:SystemDateAndTime><tt:DateTimeType>NTP</tt:DateTimeType><tt:DaylightSavings>false</tt:DaylightSavings><tt:TimeZone><tt:TZ>UTC0</tt:TZ></tt:TimeZone><tt:UTCDateTime><tt:Time><tt:Hour>\(t.hour)</tt:Hour><tt:Minute>\(t.minute)</tt:Minute><tt:Second>\(t.second)</tt:Second></tt:Time><tt:Date><tt:Year>\(t.year)</tt:Year><tt:Month>\(t.month)</tt:Month><tt:Day>\(t.day)</tt:Day></tt:Date></tt:UTCDateTime></tds:SystemDateAndTime></tds:GetSystemDateAndTimeResponse>"
    }

    func capabilities(_ categories: [String], authority: String) -> SOAPReply {
        let device =
            "<tt:Device><tt:XAddr>\(MarkupText.escaped(deviceService(authority)))</tt:XAddr><tt:Network><tt:IPFilter>false</tt:IPFilter><tt:ZeroConfiguration>false</tt:ZeroConfiguration><tt:IPVersion6>false</tt:IPVersion6><tt:DynDNS>false</tt:DynDNS></tt:Network><tt:System><tt:DiscoveryResolve>false</tt:DiscoveryResolve><tt:DiscoveryBye>true</tt:DiscoveryBye><tt:RemoteDiscovery>false</tt:RemoteDiscovery><tt:SystemBackup>false</tt:SystemBackup><tt:SystemLogging>false</tt:SystemLogging><tt:FirmwareUpgrade>false</tt:FirmwareUpgrade><tt:SupportedVersions><tt:Major>2</tt:Major><tt:Minor>0</tt:Minor></tt:SupportedVersions></tt:System></tt:Device>"
        let events =
            "<tt:Events><tt:XAddr>\(MarkupText.escaped(eventsService(authority)))</tt:XAddr><tt:WSSubscriptionPolicySupport>false</tt:WSSubscriptionPolicySupport><tt:WSPullPointSupport>true</tt:WSPullPointSupport><tt:WSPausableSubscriptionManagerInterfaceSupport>false</tt:WSPausableSubscriptionManagerInterfaceSupport></tt:Events>"
        let media =
            "<tt:Media><tt:XAddr>\(MarkupText.escaped(mediaService(authority)))</tt:XAddr><tt:StreamingCapabilities><tt:RTPMulticast>false</tt:RTPMulticast><tt:RTP_TCP>true</tt:RTP_TCP><tt:RTP_RTSP_TCP>true</tt:RTP_RTSP_TCP></tt:StreamingCapabilities></tt:Media>"
        var parts: [String] = []
        for category in categories.isEmpty ? ["All"] : categories {
            switch category {
            case "All": parts = [device, events, media]
            case "Device": parts.append(device)
            case "Events": parts.append(events)
            case "Media": parts.append(media)
            default:
                return .fault(
                    "env:Receiver", ["ter:ActionNotSupported", "ter:NoSuchService"],
                    "This camera has no \(category.prefix(32)) service: only the device and media services.")
            }
        }
        return .envelope(
            "<tds:GetCapabilitiesResponse><tds:Capabilities>\(parts.joined())</tds:Capabilities></tds:GetCapabilitiesResponse>"
        )
    }

    func services(_ includeCapability: Bool, authority: String) -> String {
        func service(_ namespace: String, _ address: String, _ capabilities: String) -> String {
            let shown = includeCapability ? "<tds:Capabilities>\(capabilities)</tds:Capabilities>" : ""
            return
                "<tds:Service><tds:Namespace>\(namespace)</tds:Namespace><tds:XAddr>\(MarkupText.escaped(address))</tds:XAddr>\(shown)<tds:Version><tt:Major>2</tt:Major><tt:Minor>0</tt:Minor></tds:Version></tds:Service>"
        }
        return
            "<tds:GetServicesResponse>\(service(Namespace.device, deviceService(authority), deviceServiceCapabilities))\(service(Namespace.media, mediaService(authority), mediaServiceCapabilities))\(service(ONVIFEvents.namespace, eventsService(authority), ONVIFEvents.serviceCapabilities.replacing("<tev:Capabilities", with: "<tev:Capabilities xmlns:tev=\"\(ONVIFEvents.namespace)\"")))</tds:GetServicesResponse>"
    }

    var deviceServiceCapabilities: String {
        "<tds:Capabilities><tds:Network IPFilter=\"false\" ZeroConfiguration=\"false\" IPVersion6=\"false\" DynDNS=\"false\"/><tds:Security UsernameToken=\"true\" HttpDigest=\"true\"/><tds:System DiscoveryResolve=\"false\" DiscoveryBye=\"true\" RemoteDiscovery=\"false\" SystemBackup=\"false\" SystemLogging=\"false\" FirmwareUpgrade=\"false\"/></tds:Capabilities>"
    }

    var mediaServiceCapabilities: String {
        "<trt:Capabilities SnapshotUri=\"true\" Rotation=\"false\" VideoSourceMode=\"false\" OSD=\"false\"><trt:ProfileCapabilities MaximumNumberOfProfiles=\"1\"/><trt:StreamingCapabilities RTPMulticast=\"false\" RTP_TCP=\"true\" RTP_RTSP_TCP=\"true\"/></trt:Capabilities>"
    }

    var resolution: String {
        "<tt:Resolution><tt:Width>\(video.width)</tt:Width><tt:Height>\(video.height)</tt:Height></tt:Resolution>"
    }

    func sourceConfiguration(_ element: String) -> String {
        "<\(element) token=\"video_source_config\"><tt:Name>video_source_config</tt:Name><tt:UseCount>1</tt:UseCount><tt:SourceToken>\(Self.sourceToken)</tt:SourceToken><tt:Bounds x=\"0\" y=\"0\" width=\"\(video.width)\" height=\"\(video.height)\"/></\(element)>"
    }

    func encoderConfiguration(_ element: String) -> String {
        let rate = max(1, Int(video.framesPerSecond.rounded()))
        return
            "<\(element) token=\"video_encoder_config\"><tt:Name>video_encoder_config</tt:Name><tt:UseCount>1</tt:UseCount><tt:Encoding>H264</tt:Encoding>\(resolution)<tt:Quality>5</tt:Quality><tt:RateControl><tt:FrameRateLimit>\(rate)</tt:FrameRateLimit><tt:EncodingInterval>1</tt:EncodingInterval><tt:BitrateLimit>0</tt:BitrateLimit></tt:RateControl><tt:H264><tt:GovLength>\(max(1, video.keyframeInterval))</tt:GovLength><tt:H264Profile>\(MarkupText.escaped(video.profile))</tt:H264Profile></tt:H264><tt:Multicast><tt:Address><tt:Type>IPv4</tt:Type><tt:IPv4Address>0.0.0.0</tt:IPv4Address></tt:Address><tt:Port>0</tt:Port><tt:TTL>0</tt:TTL><tt:AutoStart>false</tt:AutoStart></tt:Multicast><tt:SessionTimeout>PT60S</tt:SessionTimeout></\(element)>"
    }

    /// The one profile, as the element `element` (`trt:Profiles`, `trt:Profile`).
    func profile(_ element: String) -> String {
        "<\(element) token=\"\(Self.profileToken)\" fixed=\"true\"><tt:Name>\(MarkupText.escaped(camera))</tt:Name>\(sourceConfiguration("tt:VideoSourceConfiguration"))\(encoderConfiguration("tt:VideoEncoderConfiguration"))</\(element)>"
    }

    func mediaURI(_ uri: String) -> String {
        "<trt:MediaUri><tt:Uri>\(MarkupText.escaped(uri))</tt:Uri><tt:InvalidAfterConnect>false</tt:InvalidAfterConnect><tt:InvalidAfterReboot>false</tt:InvalidAfterReboot><tt:Timeout>PT0S</tt:Timeout></trt:MediaUri>"
    }

    var noProfile: SOAPReply {
        .fault(
            "env:Sender", ["ter:InvalidArgVal", "ter:NoProfile"],
            "No such profile: this camera has one, \"\(Self.profileToken)\".")
    }

    func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e9 ? "\(Int(value))" : "\(value)"
    }
}
