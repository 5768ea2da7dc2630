#!/usr/bin/env python3
"""Load for an OpenAI-compatible server (kiln serve, or llama-server for comparison), streamed
chat-less text completions over plain HTTP (no client library, so both servers see the same
requests).

  serve_soak.py clients --url http://127.0.0.1:8080 --model tl -n 8 --max-tokens 128
      each of N prompts alone, then all N at once: every concurrent text must equal its solo
      text (greedy); prints single-client and aggregate tokens/s.
  serve_soak.py soak --url ... --model tl --clients 16 --seconds 600 --pid PID
      N clients streaming back to back for the whole time: errors, p50/p99 time to first token,
      aggregate tokens/s, and the server's RSS (VmRSS of PID) over time.
Prints one JSON object on stdout.
"""
import argparse
import json
import statistics
import threading
import time

import requests

PROMPTS = [
    "Once upon a time, in a small village by the sea,",
    "The history of the printing press begins",
    "Here is a recipe for a simple tomato soup:",
    "The three laws of motion state that",
    "In the year 2150, the first colony on Mars",
    "A short poem about autumn leaves:",
    "The main differences between cats and dogs are",
    "To install a new kitchen faucet, first",
    "The old lighthouse keeper looked out at the storm and",
    "Photosynthesis is the process by which",
    "My favourite memory from childhood is",
    "The rules of chess are simple:",
    "When the train stopped in the middle of the desert,",
    "An introduction to prime numbers:",
    "The detective opened the envelope and read",
    "Ten tips for a good night's sleep:",
]


def stream_completion(url, model, prompt, max_tokens, timeout=600):
    """One streamed completion: (text, completion tokens, time to first token, total time)."""
    t0 = time.perf_counter()
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    r = requests.post(url + "/v1/completions", json=body, stream=True, timeout=timeout)
    if r.status_code != 200:
        raise RuntimeError(f"HTTP {r.status_code}: {r.text[:200]}")
    text, ttft, chunks, usage = [], None, 0, None
    for line in r.iter_lines():
        if not line.startswith(b"data: "):
            continue
        data = line[6:]
        if data == b"[DONE]":
            break
        j = json.loads(data)
        if "error" in j:
            raise RuntimeError(j["error"].get("message"))
        if j.get("usage"):
            usage = j["usage"]
        for c in j.get("choices") or []:
            piece = c.get("text") or ""
            if piece:
                if ttft is None:
                    ttft = time.perf_counter() - t0
                chunks += 1
                text.append(piece)
    total = time.perf_counter() - t0
    n = usage["completion_tokens"] if usage else chunks
    return "".join(text), n, ttft if ttft is not None else total, total


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def cmd_clients(a):
    prompts = PROMPTS[: a.n]
    stream_completion(a.url, a.model, prompts[0], 8)  # warm up: page in the weights
    solo = []
    for p in prompts:
        text, n, ttft, total = stream_completion(a.url, a.model, p, a.max_tokens)
        solo.append({"text": text, "tokens": n, "ttft_s": ttft, "seconds": total, "tok_s": n / total})
    results = [None] * len(prompts)

    def run(i):
        results[i] = stream_completion(a.url, a.model, prompts[i], a.max_tokens)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    tokens = sum(r[1] for r in results)
    same = [results[i][0] == solo[i]["text"] for i in range(len(prompts))]
    single = statistics.median(s["tok_s"] for s in solo)
    out = {"clients": len(prompts), "max_tokens": a.max_tokens,
           "single_client_tok_s_median": round(single, 2),
           "aggregate_tok_s": round(tokens / wall, 2), "speedup": round(tokens / wall / single, 2),
           "all_complete": all(r is not None and r[1] > 0 for r in results),
           "equal_to_solo": sum(same), "ttft_concurrent_median_s": round(statistics.median(r[2] for r in results), 3),
           "wall_s": round(wall, 2)}
    print(json.dumps(out))


def cmd_soak(a):
    stop_at = time.time() + a.seconds
    lock = threading.Lock()
    ttfts, rates, errors, tokens = [], [], [], [0]

    def client(k):
        i = k
        while time.time() < stop_at:
            try:
                _, n, ttft, total = stream_completion(a.url, a.model, PROMPTS[i % len(PROMPTS)], a.max_tokens)
                with lock:
                    ttfts.append(ttft)
                    tokens[0] += n
                    if total > ttft and n > 1:
                        rates.append((n - 1) / (total - ttft))
            except Exception as e:  # counted, and the client goes on
                with lock:
                    errors.append(str(e)[:200])
            i += 1

    t0 = time.time()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(a.clients)]
    for t in threads:
        t.start()
    rss = []
    while any(t.is_alive() for t in threads):
        if a.pid:
            rss.append((round(time.time() - t0, 1), round(rss_mib(a.pid), 1)))
        time.sleep(a.sample)
    wall = time.time() - t0
    q = statistics.quantiles(ttfts, n=100) if len(ttfts) >= 2 else [float("nan")] * 99
    # RSS after the first minute (warm-up: every slot's KV cache touched) to the end.
    steady = [m for s, m in rss if s >= min(60, a.seconds / 4)]
    out = {"clients": a.clients, "seconds": round(wall, 1), "requests": len(ttfts), "errors": len(errors),
           "first_errors": errors[:3], "tokens": tokens[0], "aggregate_tok_s": round(tokens[0] / wall, 2),
           "per_request_decode_tok_s_median": round(statistics.median(rates), 2) if rates else None,
           "ttft_p50_s": round(q[49], 3), "ttft_p99_s": round(q[98], 3),
           "rss_mib_start": rss[0][1] if rss else None, "rss_mib_end": rss[-1][1] if rss else None,
           "rss_mib_steady_min": min(steady) if steady else None, "rss_mib_steady_max": max(steady) if steady else None,
           "rss_samples": rss}
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("clients")
    c.add_argument("--url", required=True)
    c.add_argument("--model", required=True)
    c.add_argument("-n", type=int, default=8)
    c.add_argument("--max-tokens", type=int, default=128)
    s = sub.add_parser("soak")
    s.add_argument("--url", required=True)
    s.add_argument("--model", required=True)
    s.add_argument("--clients", type=int, default=16)
    s.add_argument("--seconds", type=float, default=600)
    s.add_argument("--max-tokens", type=int, default=64)
    s.add_argument("--pid", type=int, default=0)
    s.add_argument("--sample", type=float, default=5)
    a = ap.parse_args()
    cmd_clients(a) if a.cmd == "clients" else cmd_soak(a)


if __name__ == "__main__":
    main()
