"""A minimal bash-tool coding agent (stdlib only) speaking the OpenAI chat-completions wire.

Like mini-swe-agent: it sends the whole history each turn, runs the ``bash`` tool call the
model returns in the workspace, and stops when a command prints
``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``. A refused or failed call ends it with status 1.
``--stream`` asks for streamed responses (SSE) and reassembles the tool call.
"""

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

FINISH = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def ask(messages, stream):
    body = {
        "model": os.environ["HARNESS_MODEL"],
        "messages": messages,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "bash",
                    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
                },
            }
        ],
    }
    if stream:
        body["stream"] = True
    req = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={
            "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(req, timeout=120) as resp:
        raw = resp.read()
    if not stream:
        return json.loads(raw)["choices"][0]["message"]
    msg = {"role": "assistant", "content": "", "tool_calls": []}
    for line in raw.splitlines():
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        for choice in json.loads(line[6:]).get("choices", []):
            delta = choice.get("delta", {})
            msg["content"] += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                if tc.get("id"):
                    msg["tool_calls"].append(
                        {
                            "id": tc["id"],
                            "type": "function",
                            "function": {"name": tc["function"]["name"], "arguments": ""},
                        }
                    )
                msg["tool_calls"][-1]["function"]["arguments"] += tc["function"].get(
                    "arguments", ""
                )
    return msg


def main():
    stream = "--stream" in sys.argv
    with open(os.environ["HARNESS_REQUEST"]) as fh:
        messages = [{"role": "user", "content": fh.read()}]
    turns = 0
    while True:
        try:
            msg = ask(messages, stream)
        except urllib.error.HTTPError as exc:
            print(f"model call refused: {exc.code} {exc.read()[:300]!r}", file=sys.stderr)
            sys.exit(1)
        turns += 1
        messages.append(msg)
        for call in msg.get("tool_calls") or []:
            command = json.loads(call["function"]["arguments"])["command"]
            done = subprocess.run(
                ["sh", "-c", command],
                capture_output=True,
                text=True,
                cwd=os.environ["HARNESS_WORKSPACE"],
                timeout=60,
            )
            output = done.stdout + done.stderr
            print(f"$ {command}\n{output}")
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
            if FINISH in output:
                with open(os.environ["HARNESS_RESULT"], "w") as fh:
                    json.dump({"status": "submitted", "turns": turns}, fh)
                return


if __name__ == "__main__":
    main()
