"""Real ONVIF clients for CommandTests' ONVIFCommandTests (run with the Python of
scripts/test-servers.sh's clients environment). Each mode prints one JSON object a line.

camera HOST PORT USER PASSWORD [digest|text]
    What Home Assistant's ONVIF integration does at setup, through onvif-zeep-async as it
    builds it (ONVIFCamera(host, port, user, password, wsdl_dir, no_cache=True); "digest", the
    default, is its WS-Security PasswordDigest; "text" a PasswordText): update_xaddrs,
    GetSystemDateAndTime, GetDeviceInformation, GetNetworkInterfaces (a fault saying "not
    implemented" is what it handles), the capabilities, the media service's capabilities,
    GetProfiles, GetStreamUri as HA asks it, GetSnapshotUri and the picture (HTTP Digest, as
    HA fetches it). A fault ends it: {"fault": message, "subcodes": [...]} after what came.
events HOST PORT USER PASSWORD TRIGGER
    Home Assistant's event subscription: a pull point (onvif-zeep-async's PullPointManager),
    a synchronization point, then POST {"seconds": 1} to TRIGGER (the agent's /api/trigger) and
    PullMessages until motion has come and gone: {"pullpoint": WSPullPointSupport, "messages":
    [[topic, name, value, operation], ...]}.
probe HOST PORT
    A WS-Discovery Probe as wsdiscovery builds it (Home Assistant's: the scope
    onvif://www.onvif.org/Profile/Streaming), sent to HOST:PORT; the ProbeMatch read with
    wsdiscovery's parser: {"epr", "xaddrs", "scopes", "types"}, or {"timeout": true}.
send HOST PORT FILE
    The bytes of FILE as one datagram to HOST:PORT (malformed and oversized probes).
listen PORT SECONDS
    Joins 239.255.255.250 on PORT and prints each WS-Discovery message heard for SECONDS, read
    with wsdiscovery's parser: {"action", "epr", "xaddrs", "scopes"}. "ready" first.
"""

import asyncio
import json
import os
import socket
import struct
import sys
import time


def say(value):
    print(json.dumps(value, default=str), flush=True)


async def camera(host, port, user, password, mode):
    import onvif
    from onvif import ONVIFCamera
    from zeep.exceptions import Fault

    cam = ONVIFCamera(host, port, user, password, f"{os.path.dirname(onvif.__file__)}/wsdl/",
                      encrypt=(mode != "text"), no_cache=True)
    out = {}
    try:
        await cam.update_xaddrs()
        out["xaddrs"] = cam.xaddrs
        device = await cam.create_devicemgmt_service()
        clock = await device.GetSystemDateAndTime()
        out["utc"] = [clock.UTCDateTime.Date.Year, clock.UTCDateTime.Date.Month, clock.UTCDateTime.Date.Day]
        info = await device.GetDeviceInformation()
        out["info"] = {k: info[k] for k in ["Manufacturer", "Model", "FirmwareVersion", "SerialNumber", "HardwareId"]}
        try:
            await device.GetNetworkInterfaces()
            out["interfaces"] = "answered"
        except Fault as fault:
            out["interfaces"] = "not implemented" if "not implemented" in fault.message else fault.message
        capabilities = await cam.get_capabilities()
        out["capabilities"] = sorted(k for k, v in (capabilities or {}).items() if v)
        media = await cam.create_media_service()
        out["snapshot_capable"] = bool((await media.GetServiceCapabilities()).SnapshotUri)
        profiles = await media.GetProfiles()
        out["profiles"] = [{
            "token": p.token, "encoding": p.VideoEncoderConfiguration.Encoding,
            "width": p.VideoEncoderConfiguration.Resolution.Width,
            "height": p.VideoEncoderConfiguration.Resolution.Height,
        } for p in profiles]
        request = media.create_type("GetStreamUri")
        request.ProfileToken = profiles[0].token
        request.StreamSetup = {"Stream": "RTP-Unicast", "Transport": {"Protocol": "RTSP"}}
        out["stream"] = (await media.GetStreamUri(request)).Uri
        out["snapshot"] = await cam.get_snapshot_uri(profiles[0].token)
        picture = await cam.get_snapshot(profiles[0].token)
        out["picture"] = picture[:3].hex() if picture else None
        out["picture_bytes"] = len(picture) if picture else 0
    except Fault as fault:
        out["fault"] = fault.message
        out["subcodes"] = [getattr(code, "text", str(code)) for code in (fault.subcodes or [])]
    except Exception as error:  # what HA would log: the test says it
        out["error"] = f"{type(error).__name__}: {error}"
    finally:
        await cam.close()
    say(out)


async def events(host, port, user, password, trigger):
    import datetime as dt
    import urllib.request

    import onvif
    from onvif import ONVIFCamera

    cam = ONVIFCamera(host, port, user, password, f"{os.path.dirname(onvif.__file__)}/wsdl/", no_cache=True)
    out = {"messages": []}
    try:
        await cam.update_xaddrs()
        capabilities = await cam.get_capabilities()
        out["pullpoint"] = (capabilities.get("Events") or {}).get("WSPullPointSupport")
        manager = await cam.create_pullpoint_manager(dt.timedelta(seconds=60), lambda: None)
        service = manager.get_service()
        await service.SetSynchronizationPoint()
        request = urllib.request.Request(trigger, data=b'{"seconds": 1}', method="POST",
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=30).read()
        for _ in range(240):
            pulled = await service.PullMessages({"MessageLimit": 100, "Timeout": dt.timedelta(seconds=5)})
            for message in pulled.NotificationMessage:
                item = message.Message._value_1.Data.SimpleItem[0]
                out["messages"].append([message.Topic._value_1, item.Name, item.Value,
                                        message.Message._value_1.PropertyOperation])
            values = [m[2] for m in out["messages"] if m[3] == "Changed"]
            if "true" in values and values[-1] == "false":
                break
            await asyncio.sleep(0.5)
        await manager.stop() if hasattr(manager, "stop") else None
    except Exception as error:
        out["error"] = f"{type(error).__name__}: {error}"
    finally:
        await cam.close()
    say(out)


def probe(host, port):
    from wsdiscovery.actions.probe import constructProbe, createProbeMessage
    from wsdiscovery.message import parseSOAPMessage
    from wsdiscovery.scope import Scope

    message = createProbeMessage(constructProbe([], [Scope("onvif://www.onvif.org/Profile/Streaming")]))
    data = message if isinstance(message, bytes) else message.encode()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(10)
    s.sendto(data, (host, port))
    try:
        reply, sender = s.recvfrom(65536)
    except socket.timeout:
        say({"timeout": True})
        return
    parsed = parseSOAPMessage(reply, sender[0])
    for match in parsed.getProbeResolveMatches():
        say({"epr": match.getEPR(), "xaddrs": match.getXAddrs(), "scopes": [str(x) for x in match.getScopes()],
             "types": [str(t) for t in match.getTypes()], "action": parsed.getAction().rsplit("/", 1)[-1]})


def send(host, port, path):
    with open(path, "rb") as f:
        data = f.read()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(data, (host, port))
    say({"sent": len(data)})


def listen(port, seconds):
    from wsdiscovery.message import parseSOAPMessage

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", port))
    joined = 0
    for index, _name in socket.if_nameindex():
        mreqn = struct.pack("4s4si", socket.inet_aton("239.255.255.250"), socket.inet_aton("0.0.0.0"), index)
        try:
            s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreqn)
            joined += 1
        except OSError:
            pass
    say({"ready": joined})
    end = time.time() + seconds
    while time.time() < end:
        s.settimeout(max(0.1, end - time.time()))
        try:
            data, sender = s.recvfrom(65536)
        except socket.timeout:
            break
        parsed = parseSOAPMessage(data, sender[0])
        if parsed is None:
            continue
        say({"action": parsed.getAction().rsplit("/", 1)[-1], "epr": parsed.getEPR(), "xaddrs": parsed.getXAddrs(),
             "scopes": [str(x) for x in parsed.getScopes()]})


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "camera":
        asyncio.run(camera(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5],
                           sys.argv[6] if len(sys.argv) > 6 else "digest"))
    elif mode == "events":
        asyncio.run(events(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]))
    elif mode == "probe":
        probe(sys.argv[2], int(sys.argv[3]))
    elif mode == "send":
        send(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif mode == "listen":
        listen(int(sys.argv[2]), float(sys.argv[3]))
