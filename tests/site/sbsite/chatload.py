"""A minimal load generator (run as a program): the trace's sessions as streaming chat requests, ``--concurrency``
sessions at a time, each session's turns in order, until ``--duration`` seconds pass; one JSON line per request in OUT/requests.jsonl, then OUT/done.json."""

import argparse
import json
import threading
import time
from pathlib import Path

import httpx


def main() -> None:
    ap = argparse.ArgumentParser()
    for name in ("--url", "--model", "--trace", "--out"):
        ap.add_argument(name, required=True)
    ap.add_argument("--concurrency", type=int, required=True)
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--stamp", action="store_true", help="a fault: stamp each request's system prompt anew (a client "
                    "that changes a turn's bytes, so no turn shares a cached prefix with the one before)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sessions: dict[str, list] = {}
    for line in Path(args.trace).read_text().splitlines():
        turn = json.loads(line)
        sessions.setdefault(turn["session_id"], []).append(turn)
    order = list(sessions.values())
    lock, records, cursor = threading.Lock(), open(out / "requests.jsonl", "a"), [0]
    stop = time.time() + args.duration

    def turns():              # a lane takes a whole session and sends its turns one after another, as an agent does
        while True:
            with lock:
                session = order[cursor[0] % len(order)]
                cursor[0] += 1
            yield from session

    def lane() -> None:
        mine = turns()
        with httpx.Client(timeout=120) as client:
            while time.time() < stop:
                turn = next(mine)
                messages = turn["messages"]
                if args.stamp:
                    messages = [{**messages[0], "content": f"[sent {time.time():.6f}] {messages[0]['content']}"},
                                *messages[1:]]
                body = {"model": args.model, "messages": messages, "max_tokens": turn["output_length"],
                        "stream": True, "ignore_eos": True, "stream_options": {"include_usage": True}}
                rec = {"start": time.time(), "first": None, "tokens": 0, "ok": False}
                try:
                    with client.stream("POST", f"{args.url}/v1/chat/completions", json=body) as resp:
                        for line in resp.iter_lines():
                            if line.startswith("data: {"):
                                chunk = json.loads(line[6:])
                                if chunk.get("choices") and chunk["choices"][0]["delta"].get("content"):
                                    rec["first"] = rec["first"] or time.time()
                                if chunk.get("usage"):
                                    rec["tokens"] = chunk["usage"]["completion_tokens"]
                        rec["ok"] = resp.status_code == 200
                except httpx.HTTPError as err:
                    rec["error"] = str(err)
                rec["end"] = time.time()
                with lock:
                    records.write(json.dumps(rec) + "\n")
                    records.flush()

    lanes = [threading.Thread(target=lane) for _ in range(args.concurrency)]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    (out / "done.json").write_text(json.dumps({"version": "0.1", "duration_s": args.duration}))


if __name__ == "__main__":
    main()
