#!/usr/bin/env python3
"""Tests of the power-cut suite's own pieces that run on this machine (run.sh runs them
before the VM; `python3 -m unittest discover -s scripts/powercut` alone): the listed set of
states and its digests (states.py), the verdicts on clips moved aside as damaged
(check.py), and the fixtures and list the gate replays."""
import contextlib
import gzip
import hashlib
import io
import json
import os
import shutil
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402
import logwrites  # noqa: E402
import states  # noqa: E402

SECTOR = 512
IMAGE = 64 << 10  # a 64 KiB device


def write_log(path, entries):
    """A dm-log-writes log: entries are (sector, data bytes or None, flags, mark text)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<QQQI", logwrites.MAGIC, 1, len(entries), SECTOR).ljust(SECTOR, b"\0"))
        for sector, data, flags, mark in entries:
            if flags & logwrites.MARK:
                text = mark.encode()
                f.write((struct.pack("<QQQQ", 0, 0, flags, len(text)) + text).ljust(SECTOR, b"\0"))
            else:
                data = data or b""
                f.write(struct.pack("<QQQQ", sector, len(data) // SECTOR, flags, len(data)).ljust(SECTOR, b"\0"))
                f.write(data)


def sample_log(path):
    """Writes between three flushes, a FUA write, a mark: enough for torn states to differ."""
    w = lambda sector, byte, n=8: (sector, bytes([byte]) * (n * SECTOR), 0, None)  # noqa: E731
    entries = [
        (0, None, logwrites.MARK, "mkfs"),
        w(0, 1), w(8, 2, 16), (0, None, logwrites.FLUSH, None),
        w(24, 3), w(40, 4, 24), (64, bytes([5]) * 4096, logwrites.FUA, None), (0, None, logwrites.MARK, "saved:a.mov"),
        (0, None, logwrites.FLUSH, None),
        w(72, 6, 32), w(8, 7), (0, None, logwrites.FLUSH, None),
        w(100, 8),
    ]
    write_log(path, entries)


def sha16(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


class StatesListTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.log = os.path.join(self.tmp, "log")
        self.base = os.path.join(self.tmp, "base.img")
        sample_log(self.log)
        with open(self.base, "wb") as f:
            f.write(b"\x09" * 4096)
            f.truncate(IMAGE)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_digests_are_the_images_that_logwrites_builds_and_do_not_change(self):
        log = logwrites.Log(self.log)
        flushes = log.flushes()
        ids = ["END"] + [f"F{k}" for k in flushes] + [f"T{k}.{j}" for k in flushes for j in range(4)]
        first = states.digests(self.log, self.base, ids, "14", "exfat")
        self.assertEqual(first, states.digests(self.log, self.base, ids, "14", "exfat"))
        for i in ids:
            image = os.path.join(self.tmp, "state.img")
            logwrites.build(log, self.base, i, "14", "exfat", image)
            self.assertEqual(first[i], sha16(image), i)
        # A torn state is drawn with the seed and the file system's name; F and END are not.
        other = states.digests(self.log, self.base, ids, "15", "exfat")
        self.assertEqual({i: first[i] for i in ids if i[0] != "T"}, {i: other[i] for i in ids if i[0] != "T"})
        self.assertNotEqual({i: first[i] for i in ids if i[0] == "T"}, {i: other[i] for i in ids if i[0] == "T"})

    def test_a_list_that_cannot_be_judged_is_refused(self):
        line = lambda state, seed="14", rec="exfat": states.Line("exfat", state, seed, rec, "0" * 16)  # noqa: E731
        states.by_recording([line("F3"), line("T3.0"), line("END")])
        with self.assertRaisesRegex(states.ListError, "T3.0 is listed without F3"):
            states.by_recording([line("T3.0"), line("END")])
        with self.assertRaisesRegex(states.ListError, "no END"):
            states.by_recording([line("F3")])
        with self.assertRaisesRegex(states.ListError, "more than one seed"):
            states.by_recording([line("F3"), line("END", seed="7")])
        with self.assertRaisesRegex(states.ListError, "more than once"):
            states.by_recording([line("F3"), line("F3"), line("END")])
        for bad in ("exfat F3 14 exfat", "exfat G3 14 exfat 0123456789abcdef", "exfat F3 14 exfat 0123"):
            with self.assertRaises(states.ListError, msg=bad):
                states.parse(bad + "\n")

    def test_the_gate_stops_before_the_vm_when_a_state_is_not_the_listed_one(self):
        fixtures = os.path.join(self.tmp, "fixtures")
        rec = os.path.join(fixtures, "exfat")
        os.makedirs(rec)
        states.xz(self.log, os.path.join(rec, "log.xz"))
        states.xz(self.base, os.path.join(rec, "base.img.xz"))
        with open(os.path.join(rec, "recording.json"), "w") as f:
            json.dump({"fs": "exfat"}, f)
        with open(os.path.join(rec, "vigil.conf"), "w") as f:
            f.write("# a configuration\n")
        log = logwrites.Log(self.log)
        k = log.flushes()[1]
        ids = [f"F{k}", f"T{k}.0", f"T{k}.1", "END"]
        found = states.digests(self.log, self.base, ids, "14", "exfat")
        lines = [states.Line("exfat", i, "14", "exfat", found[i]) for i in ids]
        listed = os.path.join(self.tmp, "states.list")
        states.write_list(["# test"], "(seed 14)", lines[:2], lines[2:], path=listed)
        saved = states.LIST, states.FIXTURES
        states.LIST, states.FIXTURES = listed, fixtures
        try:
            out = os.path.join(self.tmp, "out")
            plan = states.prepare(out)
            self.assertEqual(plan["recordings"]["exfat"]["states"], [f"F{k}", f"T{k}.0", f"T{k}.1", "END"])
            self.assertEqual(plan["recordings"]["exfat"]["seed"], "14")
            with open(os.path.join(out, "exfat", "log"), "rb") as a, open(self.log, "rb") as b:
                self.assertEqual(a.read(), b.read())
            # The drawn block and the kept lines survive a rewrite.
            header, drawn, others = states.read_list(listed)
            self.assertEqual([x.text() for x in drawn], [x.text() for x in lines[:2]])
            self.assertEqual([x.text() for x in others], [x.text() for x in lines[2:]])
            # A state that is not the listed one (the fixture, or how logwrites.py draws the
            # torn pieces, changed): refused, with the line.
            lines[1].digest = found[f"T{k}.1"]
            states.write_list(["# test"], "(seed 14)", lines[:2], lines[2:], path=listed)
            with self.assertRaisesRegex(states.ListError, rf"exfat T{k}.0 of exfat: its image's digest is {found[f'T{k}.0']}"):
                states.prepare(out)
            # A state kept as an image beside its recording is taken as it is.
            image = os.path.join(self.tmp, "kept.img")
            logwrites.build(log, self.base, f"T{k}.1", "14", "exfat", image)
            states.xz(image, os.path.join(rec, f"T{k}.0.img.xz"))
            plan = states.prepare(out)
            self.assertEqual(plan["recordings"]["exfat"]["images"], [f"T{k}.0"])
        finally:
            states.LIST, states.FIXTURES = saved

    def make_run(self, name, mode, seed, ids=(), base_byte=9):
        """A run directory as run.sh leaves it, of one exFAT recording (this log, a base
        image of `base_byte`s) whose states `ids` were tested."""
        run = os.path.join(self.tmp, name)
        os.makedirs(os.path.join(run, "exfat"))
        with open(self.log, "rb") as f, gzip.open(os.path.join(run, "exfat", "log.gz"), "wb") as g:
            g.write(f.read())
        with gzip.open(os.path.join(run, "exfat", "base.img.gz"), "wb") as g:
            g.write(bytes([base_byte]) * 4096 + bytes(IMAGE - 4096))
        with open(os.path.join(run, "run.json"), "w") as f:
            json.dump({"mode": mode, "seed": seed, "recordings": {"exfat": "exfat"}, "commit": "abcdef0123456789"}, f)
        with open(os.path.join(run, "exfat", "log-info.json"), "w") as f:
            json.dump({"fs": "exfat", "saved": [{}, {}], "opened": ["a", "b", "c"]}, f)
        with open(os.path.join(run, "exfat", "vigil.conf"), "w") as f:
            f.write("# a configuration\n")
        with open(os.path.join(run, "exfat", "states.jsonl"), "w") as f:
            for i in ids:
                f.write(json.dumps({"id": i}) + "\n")
        return run

    def test_a_failing_state_stays_listed_when_the_fixtures_are_recorded_again(self):
        saved = states.LIST, states.FIXTURES
        states.LIST, states.FIXTURES = os.path.join(self.tmp, "states.list"), os.path.join(self.tmp, "fixtures")
        try:
            k = logwrites.Log(self.log).flushes()[1]
            ids = [f"F{k}", f"T{k}.0", f"T{k}.1", "END"]
            first = self.make_run("20261203-080000-record", "record", "14", ids)
            with contextlib.redirect_stdout(io.StringIO()):
                states.adopt(first)
            _, drawn, others = states.read_list()
            self.assertEqual(([x.state for x in drawn], others), (ids, []))
            # The gate found T<k>.1 failing: kept, with what it is judged against.
            gate = os.path.join(self.tmp, "20261204-090000-gate")
            os.makedirs(gate)
            with open(os.path.join(gate, "run.json"), "w") as f:
                json.dump({"mode": "gate", "commit": "0123456789abcdef"}, f)
            with open(os.path.join(gate, "summary.json"), "w") as f:
                json.dump({"recordings": {"exfat": {"failures": {f"T{k}.1": ["x.mov: ffprobe: moov atom not found"]}}}}, f)
            with contextlib.redirect_stdout(io.StringIO()):
                states.keep(gate, "exfat", [f"T{k}.1"])
            _, drawn, others = states.read_list()
            self.assertEqual([x.state for x in drawn], [f"T{k}.0"])
            self.assertEqual([x.state for x in others], [f"F{k}", f"T{k}.1", "END"])
            self.assertIn("failed in make test-powercut (", others[1].origin)
            self.assertIn("moov atom not found", others[1].origin)
            self.assertEqual(others[0].origin, f"judges T{k}.1")
            # Recorded again: the new recording is the draw; the kept states stay, with theirs.
            second = self.make_run("20261205-100000-record", "record", "14", ids, base_byte=3)
            with contextlib.redirect_stdout(io.StringIO()):
                states.adopt(second)
            _, drawn, others = states.read_list()
            self.assertEqual([(x.state, x.recording) for x in drawn], [(i, "exfat") for i in ids])
            self.assertEqual([(x.state, x.recording) for x in others],
                             [(i, "exfat-20261203-080000-record") for i in (f"F{k}", f"T{k}.1", "END")])
            plan = states.prepare(os.path.join(self.tmp, "out"))
            self.assertEqual(sorted(plan["recordings"]), ["exfat", "exfat-20261203-080000-record"])
        finally:
            states.LIST, states.FIXTURES = saved

    def test_a_failing_state_of_an_exploration_comes_with_the_lines_that_keep_it(self):
        run = self.make_run("20261203-080000-explore", "explore", "321")
        with open(self.base, "rb") as f, gzip.open(os.path.join(run, "exfat", "base.img.gz"), "wb") as g:
            g.write(f.read())
        k = logwrites.Log(self.log).flushes()[1]
        with open(os.path.join(run, "summary.json"), "w") as f:
            json.dump({"recordings": {"exfat": {"failures": {f"T{k}.2": ["a.mov: ffprobe: moov atom not found"]}}}}, f)
        fixture, lines = states.add_lines(run, "exfat", [f"T{k}.2"], set())
        self.assertEqual(fixture, "exfat-20261203-080000-explore")
        self.assertEqual([x.state for x in lines], [f"F{k}", f"T{k}.2", "END"])
        torn = lines[1]
        self.assertEqual((torn.fs, torn.seed, torn.recording), ("exfat", "321", fixture))
        self.assertIn("failed in make test-powercut-explore SEED=321", torn.origin)
        self.assertIn("moov atom not found", torn.origin)
        image = os.path.join(self.tmp, "state.img")
        logwrites.build(logwrites.Log(self.log), self.base, f"T{k}.2", "321", "exfat", image)
        self.assertEqual(torn.digest, sha16(image))
        # A line already listed is not added twice.
        _, again = states.add_lines(run, "exfat", [f"T{k}.2"], {(fixture, "END"), (fixture, f"F{k}")})
        self.assertEqual([x.state for x in again], [f"T{k}.2"])


class ListedSetTests(unittest.TestCase):
    """The list the gate replays, as committed."""

    def test_every_listed_state_has_its_recording_and_can_be_judged(self):
        _, drawn, others = states.read_list()
        groups = states.by_recording(drawn + others)
        self.assertTrue(drawn, "states.list has no drawn states")
        filesystems = {line.fs for line in drawn}
        self.assertEqual(filesystems, {"ext4-ordered", "ext4-writeback", "vfat", "exfat", "f2fs"})
        for name, group in groups.items():
            for needed in ("log.xz", "base.img.xz", "recording.json", "vigil.conf"):
                self.assertTrue(os.path.isfile(os.path.join(states.FIXTURES, name, needed)), f"fixtures/{name}/{needed}")
            with open(os.path.join(states.FIXTURES, name, "recording.json")) as f:
                self.assertEqual(json.load(f)["fs"], group[0].fs, name)
        for line in others:
            self.assertTrue(line.origin, f"states.list:{line.number}: a kept state must say where it came from")


class DamagedClipTests(unittest.TestCase):
    """check.py on clips start-up repair moved aside as NAME.mov.damaged."""

    CLIP = "2026-12-03/pc-20261203-073654.mov"
    SAVED = "2026-12-03/pc-20261203-073605.mov"

    def setUp(self):
        self.out = tempfile.mkdtemp()
        os.makedirs(os.path.join(self.out, "exfat"))
        self.info = {"fs": "exfat", "entries": 100, "flushes": 10, "marks": [[40, "saved:" + self.SAVED], [41, "opened:" + self.CLIP]],
                     "saved": [{"file": self.SAVED, "frames": 3}]}
        self.decoded = {}

    def tearDown(self):
        shutil.rmtree(self.out)

    def clip(self, name, frames):
        sha = hashlib.sha256(f"{name}/{frames}".encode()).hexdigest()
        self.decoded[sha] = {"probe_ok": True, "probe_err": "", "decode_err": "", "packets": [f"p{i}" for i in range(frames)]}
        return [1000 + frames, sha]

    def state(self, state_id, at, after, before=None):
        # A journal line follows a clip moved aside (or marks it damaged): either names it.
        journal = "".join(json.dumps({"file": p}) + "\n" for p in sorted(after))
        return {"fs": "exfat", "id": state_id, "at": at, "how": {}, "fsck": [0, ""], "mount": [0, ""],
                "files_before": before if before is not None else after, "repair": [65, ""],
                "agent": {"exit": 0, "came_up": True, "log": "level=info msg=\"vigil running\"\n"},
                "files_after": dict(after, **{"events.jsonl": [10, "j"]}), "journal": journal,
                "catalogue": {"files": sorted(after), "recording": []}}

    def judge(self, *states_):
        with open(os.path.join(self.out, "exfat", "log-info.json"), "w") as f:
            json.dump(self.info, f)
        with open(os.path.join(self.out, "exfat", "states.jsonl"), "w") as f:
            for s in states_:
                f.write(json.dumps(s) + "\n")
        result = check.check_fs(self.out, "exfat", self.decoded)
        return result[2], result

    def end(self):
        return self.state("END", 100, {self.SAVED: self.clip(self.SAVED, 3), self.CLIP: self.clip(self.CLIP, 4)})

    def test_a_clip_never_synced_whole_moved_aside_with_its_bytes_is_the_right_outcome(self):
        torn_bytes = [512, "b" * 64]
        before = {self.SAVED: self.clip(self.SAVED, 3), self.CLIP: torn_bytes}
        after = {self.SAVED: self.clip(self.SAVED, 3), self.CLIP + ".damaged": torn_bytes}
        f60 = self.state("F60", 60, {self.SAVED: self.clip(self.SAVED, 3)})
        failures, result = self.judge(f60, self.state("T60.1", 60, after, before), self.end())
        self.assertEqual(failures, {})
        self.assertEqual(result[4], {"T60.1": [self.CLIP]})
        self.assertNotIn("T60.1", result[3], "a clip moved aside is an outcome, not a stray file")

    def test_every_clip_on_disk_is_in_the_catalogue_and_none_is_left_being_recorded(self):
        f60 = self.state("F60", 60, {self.SAVED: self.clip(self.SAVED, 3)})
        f60["catalogue"] = {"files": [], "recording": [self.CLIP]}
        failures, _ = self.judge(f60, self.end())
        self.assertEqual(failures, {"F60": [
            f"{self.SAVED} is on disk but not in the clip catalogue",
            f"the clip catalogue still says being recorded: {self.CLIP}"]})
        gone = self.state("F60", 60, {self.SAVED: self.clip(self.SAVED, 3)})
        gone["catalogue"] = {"files": [self.SAVED, self.CLIP], "recording": []}
        unread = self.state("F70", 70, {self.SAVED: self.clip(self.SAVED, 3)})
        unread["catalogue"] = {"error": "DatabaseError: file is not a database"}
        failures, _ = self.judge(gone, unread, self.end())
        self.assertEqual(failures, {
            "F60": [f"{self.CLIP} is in the clip catalogue but not on disk"],
            "F70": ["the clip catalogue could not be read: DatabaseError: file is not a database"]})

    def test_a_clip_moved_aside_must_keep_its_bytes(self):
        before = {self.SAVED: self.clip(self.SAVED, 3), self.CLIP: [512, "b" * 64]}
        after = {self.SAVED: self.clip(self.SAVED, 3), self.CLIP + ".damaged": [300, "c" * 64]}
        failures, _ = self.judge(self.state("T60.1", 60, after, before), self.end())
        self.assertIn("T60.1", failures)
        self.assertIn("must keep its bytes", " ".join(failures["T60.1"]))

    def test_a_saved_clip_moved_aside_fails(self):
        before = {self.SAVED: [2000, "d" * 64]}
        after = {self.SAVED + ".damaged": [2000, "d" * 64]}
        failures, _ = self.judge(self.state("F60", 60, after, before), self.end())
        self.assertIn(f"{self.SAVED} was saved before this point and was moved aside as damaged", failures["F60"])

    def test_a_clip_with_synced_frames_moved_aside_fails(self):
        f60 = self.state("F60", 60, {self.SAVED: self.clip(self.SAVED, 3), self.CLIP: self.clip(self.CLIP, 2)})
        before = {self.SAVED: self.clip(self.SAVED, 3), self.CLIP: [700, "e" * 64]}
        after = {self.SAVED: self.clip(self.SAVED, 3), self.CLIP + ".damaged": [700, "e" * 64]}
        failures, _ = self.judge(f60, self.state("T60.0", 60, after, before), self.end())
        self.assertIn(f"{self.CLIP} was moved aside as damaged: F60 had 2 synced frames of it", failures["T60.0"])

    def test_a_clip_moved_aside_and_left_in_place_fails(self):
        before = {self.SAVED: self.clip(self.SAVED, 3), self.CLIP: [700, "e" * 64]}
        after = {self.SAVED: self.clip(self.SAVED, 3), self.CLIP: self.clip(self.CLIP, 1), self.CLIP + ".damaged": [700, "e" * 64]}
        failures, _ = self.judge(self.state("T60.0", 60, after, before), self.end())
        self.assertIn(f"{self.CLIP} was moved aside as {self.CLIP}.damaged and is there too", failures["T60.0"])


if __name__ == "__main__":
    unittest.main()
