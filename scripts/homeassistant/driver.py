#!/usr/bin/env python3
"""What a user of Home Assistant sees of Vigil, asked of a real Home Assistant.

Run by scripts/homeassistant/test.sh with Home Assistant's own Python (its venv: aiohttp is
Home Assistant's), in the trixie root Home Assistant runs in, against a Home Assistant that
test.sh started with an empty configuration directory and Vigil agents it started on the host
(the root shares the host's network: loopback reaches both).

    driver.py --ha http://127.0.0.1:PORT --cameras cameras.json

cameras.json is a list of cameras to add, each an object:

    {"name": "open", "integration": "generic", "width": 320, "height": 240,
     "stream_source": "rtsp://127.0.0.1:8554/yard", "still_image_url": "http://127.0.0.1:8080/latest.jpg",
     "username": "", "password": "", "authentication": "basic"}

One integration is one entry of INTEGRATIONS: a function that goes through its config flow
(Home Assistant's REST API, as the frontend's "Add integration" does) and returns the config
entry. Whatever added it, each camera is then checked the same way (check_camera): its entity
in /api/states, its picture through /api/camera_proxy, and its stream — the HLS URL Home
Assistant hands the frontend (websocket camera/stream) — read by ffprobe and decoded by ffmpeg.
Adding ONVIF is a function `add_onvif` in INTEGRATIONS (user {auto: false}, then configure
{name, host, port, username, password}) and a camera of that integration in cameras.json.

Exits 0 when every camera passed, 1 with the first failure's reason otherwise; prints what it
saw (entity ids, the stream URL, ffprobe's answer).
"""

import argparse
import asyncio
import json
import subprocess
import sys
import time

import aiohttp

OWNER = {"name": "Vigil Test", "username": "vigil", "password": "vigil-test-password", "language": "en"}


class Failure(Exception):
    """A check that failed: what was expected, what was seen, and where to look."""


def say(message: str) -> None:
    print(f"ha-test: {message}", flush=True)


async def wait_for(what: str, attempt, timeout: float, interval: float = 1.0):
    """Calls `attempt` (async, returning a value or None) until it returns a value; Failure
    naming `what` and the last problem after `timeout` seconds (a "gave up waiting")."""
    deadline = time.monotonic() + timeout
    last = "nothing yet"
    while True:
        try:
            value = await attempt()
            if value is not None:
                return value
        except (aiohttp.ClientError, asyncio.TimeoutError, Failure) as error:
            last = f"{type(error).__name__}: {error}"
        if time.monotonic() > deadline:
            raise Failure(f"gave up waiting after {timeout:.0f} s for {what} (last: {last})")
        await asyncio.sleep(interval)


class HomeAssistant:
    """A running Home Assistant's REST and websocket APIs, signed in as its owner."""

    def __init__(self, base: str, session: aiohttp.ClientSession):
        self.base = base.rstrip("/")
        self.session = session
        self.token = ""
        self.socket = None
        self.next_id = 1

    @property
    def headers(self):
        return {"Authorization": f"Bearer {self.token}"}

    async def wait_until_up(self) -> None:
        async def onboarding():
            async with self.session.get(f"{self.base}/api/onboarding") as answer:
                return await answer.json() if answer.status == 200 else None

        steps = await wait_for("Home Assistant's /api/onboarding", onboarding, timeout=300)
        say(f"Home Assistant is up, onboarding: {steps}")

    async def onboard(self) -> None:
        """Creates the owner (onboarding's first step) and signs in with the code it gives."""
        client_id = f"{self.base}/"
        async with self.session.post(
            f"{self.base}/api/onboarding/users", json={**OWNER, "client_id": client_id}
        ) as answer:
            body = await answer.text()
            if answer.status != 200:
                raise Failure(f"/api/onboarding/users answered {answer.status}: {body}")
            code = json.loads(body)["auth_code"]
        async with self.session.post(
            f"{self.base}/auth/token",
            data={"grant_type": "authorization_code", "code": code, "client_id": client_id},
        ) as answer:
            body = await answer.text()
            if answer.status != 200:
                raise Failure(f"/auth/token answered {answer.status}: {body}")
            self.token = json.loads(body)["access_token"]
        self.socket = await self.session.ws_connect(f"{self.base}/api/websocket")
        hello = await self.socket.receive_json()
        await self.socket.send_json({"type": "auth", "access_token": self.token})
        answer = await self.socket.receive_json()
        if answer.get("type") != "auth_ok":
            raise Failure(f"the websocket API refused the owner's token: {hello} {answer}")
        say(f"onboarded: owner {OWNER['username']!r} signed in, websocket API {answer.get('ha_version')}")

    async def command(self, message: dict, timeout: float = 120):
        """Sends one websocket command and returns its result; Failure with HA's error."""
        message = {**message, "id": self.next_id}
        self.next_id += 1
        await self.socket.send_json(message)
        async with asyncio.timeout(timeout):
            while True:
                answer = await self.socket.receive_json()
                if answer.get("id") == message["id"] and answer.get("type") == "result":
                    break
        if not answer.get("success"):
            raise Failure(f"websocket {message['type']} failed: {answer.get('error')}")
        return answer.get("result")

    async def get(self, path: str):
        async with self.session.get(f"{self.base}{path}", headers=self.headers) as answer:
            body = await answer.read()
            return answer.status, answer.headers.get("Content-Type", ""), body

    async def flow(self, domain: str, steps: list) -> dict:
        """Goes through `domain`'s config flow as the frontend does (POST the handler, then each
        step's answer to the form it shows), and returns the entry made. Failure with the form's
        errors when a step shows its form again or the flow aborts."""
        async with self.session.post(
            f"{self.base}/api/config/config_entries/flow",
            headers=self.headers,
            json={"handler": domain, "show_advanced_options": True},
        ) as answer:
            result = await answer.json()
            if answer.status != 200:
                raise Failure(f"starting the {domain} config flow answered {answer.status}: {result}")
        for step in steps:
            if result.get("type") != "form":
                raise Failure(f"{domain} config flow: expected a form before {step}, got {result}")
            shown = result.get("step_id")
            async with self.session.post(
                f"{self.base}/api/config/config_entries/flow/{result['flow_id']}", headers=self.headers, json=step
            ) as answer:
                result = await answer.json()
                if answer.status != 200:
                    raise Failure(f"{domain} config flow step {shown} answered {answer.status}: {result}")
            if result.get("type") == "form" and result.get("step_id") == shown:
                raise Failure(f"{domain} config flow step {shown} refused {step}: errors {result.get('errors')}")
            if result.get("type") == "abort":
                raise Failure(f"{domain} config flow aborted at {shown}: {result.get('reason')}")
        if result.get("type") != "create_entry":
            raise Failure(f"{domain} config flow ended without an entry: {result}")
        return result["result"]

    async def refused(self, domain: str, step: dict, before: tuple = ()) -> dict:
        """The errors `domain`'s config flow shows for its first step answered with `step` (or
        for the step after the steps `before`; Failure when it takes it); the flow is then
        abandoned, as a user closing the dialog."""
        async with self.session.post(
            f"{self.base}/api/config/config_entries/flow", headers=self.headers, json={"handler": domain}
        ) as answer:
            flow = await answer.json()
        for answered in (*before, step):
            async with self.session.post(
                f"{self.base}/api/config/config_entries/flow/{flow['flow_id']}", headers=self.headers, json=answered
            ) as answer:
                result = await answer.json()
        async with self.session.delete(
            f"{self.base}/api/config/config_entries/flow/{flow['flow_id']}", headers=self.headers
        ):
            pass
        if result.get("type") != "form" or not result.get("errors"):
            raise Failure(f"{domain} config flow took {step}: {result}")
        return result["errors"]

    async def camera_of(self, entry_id: str) -> str:
        """The camera entity a config entry made, once it is in /api/states."""

        async def entity():
            for item in await self.command({"type": "config/entity_registry/list"}):
                if item.get("config_entry_id") == entry_id and item["entity_id"].startswith("camera."):
                    status, _, body = await self.get(f"/api/states/{item['entity_id']}")
                    if status == 200:
                        return item["entity_id"], json.loads(body)
            return None

        entity_id, state = await wait_for(f"the camera entity of config entry {entry_id}", entity, timeout=120)
        say(f"entity {entity_id}: state {state['state']!r}, attributes {sorted(state['attributes'])}")
        if state["state"] not in ("idle", "streaming", "recording"):
            raise Failure(f"{entity_id} is {state['state']!r} (expected idle or streaming): {state}")
        return entity_id


async def add_generic(ha: HomeAssistant, camera: dict) -> dict:
    """Generic Camera, as a user fills its form: the stream source and still image URL, the
    user and password, and in its advanced section the RTSP transport and the authentication
    of the still image; then the preview's "This image looks good"."""
    form = {
        "stream_source": camera["stream_source"],
        "still_image_url": camera["still_image_url"],
        "advanced": {
            "framerate": 2,
            "verify_ssl": False,
            "rtsp_transport": "tcp",
            "authentication": camera.get("authentication", "basic"),
        },
    }
    if camera.get("username"):
        form["username"] = camera["username"]
        form["password"] = camera["password"]
        # A wrong password: the form says so of the still image (Vigil's Digest refused it).
        wrong = {**form, "password": camera["password"] + "-wrong"}
        del wrong["stream_source"]
        errors = await ha.refused("generic", wrong)
        say(f"{camera['name']}: with a wrong password the form says {errors}")
        if errors.get("still_image_url") != "unable_still_load_auth":
            raise Failure(f"a wrong password gave {errors} (expected still_image_url: unable_still_load_auth)")
    return await ha.flow("generic", [form, {"confirmed_ok": True}])


async def add_onvif(ha: HomeAssistant, camera: dict) -> dict:
    """ONVIF, set up by hand as a user does when discovery is off: "Search automatically" no,
    then the device's host, port (Vigil's web port), user and password. A camera
    {"integration": "onvif", "host", "port", "username", "password", "width", "height"} in
    cameras.json runs it: test.sh adds one without a password and one whose user `vigil passwd
    --onvif` made (Home Assistant signs every call with a WS-Security PasswordDigest, which
    onvif.password_file checks); with a password, a wrong one first, which the form must refuse
    as auth_failed."""
    form = {
        "name": camera["name"],
        "host": camera["host"],
        "port": camera["port"],
        "username": camera.get("username", ""),
        "password": camera.get("password", ""),
    }
    if camera.get("username"):
        errors = await ha.refused("onvif", {**form, "password": camera["password"] + "-wrong"}, before=({"auto": False},))
        say(f"{camera['name']}: with a wrong password the form says {errors}")
        if errors.get("password") != "auth_failed":
            raise Failure(f"a wrong password gave {errors} (expected password: auth_failed)")
    return await ha.flow("onvif", [{"auto": False}, form])


INTEGRATIONS = {"generic": add_generic, "onvif": add_onvif}


def run(command: list, timeout: float = 120) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as error:
        raise Failure(f"{command[0]} did not end in {timeout:.0f} s: {' '.join(command)}") from error


def jpeg_size(data: bytes):
    """A JPEG's width and height, from its first start-of-frame segment; None when it has none."""
    at = 2
    while at + 9 <= len(data) and data[at] == 0xFF:
        marker, length = data[at + 1], int.from_bytes(data[at + 2 : at + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2, 0xC3):
            return int.from_bytes(data[at + 7 : at + 9], "big"), int.from_bytes(data[at + 5 : at + 7], "big")
        at += 2 + length
    return None


async def check_camera(ha: HomeAssistant, camera: dict, entity_id: str) -> None:
    """What the user sees of a camera entity: its picture and its stream."""
    status, kind, body = await ha.get(f"/api/camera_proxy/{entity_id}")
    size = jpeg_size(body) if body.startswith(b"\xff\xd8") else None
    if status != 200 or size != (camera["width"], camera["height"]):
        raise Failure(
            f"/api/camera_proxy/{entity_id} answered {status} {kind} {body[:40]!r}, a picture of {size}"
            f" (expected a JPEG of {camera['width']}×{camera['height']})"
        )
    say(f"{entity_id}: picture {len(body)} bytes, {kind}, {size[0]}×{size[1]}")

    async def stream_url():
        return (await ha.command({"type": "camera/stream", "entity_id": entity_id}))["url"]

    url = ha.base + await wait_for(f"the stream of {entity_id} (websocket camera/stream)", stream_url, timeout=120, interval=3)
    say(f"{entity_id}: stream {url}")

    # Home Assistant's HLS has a playlist once the stream's first segment is in: ffprobe until
    # it answers, then decode a few seconds of it in full.
    async def probe():
        result = await asyncio.to_thread(
            run,
            ["ffprobe", "-v", "error", "-show_entries", "stream=codec_name,width,height",
             "-of", "default=noprint_wrappers=1", url],
        )
        if result.returncode != 0 or "codec_name=" not in result.stdout:
            raise Failure(f"ffprobe exited {result.returncode}: {result.stderr.strip()}")
        return result.stdout

    found = await wait_for(f"ffprobe to read {url}", probe, timeout=120, interval=2)
    say(f"{entity_id}: ffprobe: {' '.join(found.split())}")
    expected = [f"codec_name=h264", f"width={camera['width']}", f"height={camera['height']}"]
    if any(line not in found.split() for line in expected):
        raise Failure(f"{entity_id}'s stream is not {' '.join(expected)}: ffprobe said {' '.join(found.split())}")

    decoded = await asyncio.to_thread(
        run, ["ffmpeg", "-nostdin", "-v", "error", "-stats", "-i", url, "-t", "4", "-f", "null", "-"]
    )
    progress = decoded.stderr.replace("\r", "\n").split("\n")
    problems = [line for line in progress if line.strip() and not line.startswith("frame=")]
    frames = next((line for line in reversed(progress) if line.startswith("frame=")), "")
    say(f"{entity_id}: ffmpeg decoded: {frames.strip()}")
    if decoded.returncode != 0 or problems:
        raise Failure(f"ffmpeg decoding {entity_id}'s stream exited {decoded.returncode}: {problems}")
    count = int(frames.split("=")[1].split()[0]) if frames else 0
    if count < 10:
        raise Failure(f"ffmpeg decoded {count} frames of {entity_id}'s stream in 4 s (expected at least 10)")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ha", required=True, help="Home Assistant's base URL")
    parser.add_argument("--cameras", required=True, help="the JSON list of cameras to add")
    options = parser.parse_args()
    with open(options.cameras) as file:
        cameras = json.load(file)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=180)) as session:
        ha = HomeAssistant(options.ha, session)
        try:
            await ha.wait_until_up()
            await ha.onboard()
            for camera in cameras:
                add = INTEGRATIONS.get(camera["integration"])
                if add is None:
                    raise Failure(f"no way to add a camera with integration {camera['integration']!r}")
                say(f"adding {camera['name']} with {camera['integration']}")
                entry = await add(ha, camera)
                say(f"{camera['name']}: config entry {entry['entry_id']} {entry['title']!r} {entry['state']}")
                entity_id = await ha.camera_of(entry["entry_id"])
                await check_camera(ha, camera, entity_id)
                say(f"{camera['name']}: passed")
        except Failure as failure:
            print(f"ha-test: FAILED: {failure}", file=sys.stderr, flush=True)
            return 1
        finally:
            if ha.socket is not None:
                await ha.socket.close()
    say(f"passed: {len(cameras)} camera(s)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
