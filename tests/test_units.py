"""Pure pieces of the turn path: merging incoming history, reading streams."""

from __future__ import annotations

import orjson

from compaction import Message
from proxy.merge import new_messages, split_system
from proxy.sse import StreamAccumulator, completion_from_stream, replay_as_stream

U1, A1 = Message("user", "one"), Message("assistant", "first answer")
U2, A2 = Message("user", "two"), Message("assistant", "second answer")
U3 = Message("user", "three")


def test_only_the_new_message() -> None:
    assert new_messages([U1, A1, U2, A2], [U3]) == [U3]


def test_full_history_is_cut_at_the_stored_tail() -> None:
    assert new_messages([U1, A1, U2, A2], [U1, A1, U2, A2, U3]) == [U3]


def test_history_longer_than_the_stored_tail() -> None:
    assert new_messages([U2, A2], [U1, A1, U2, A2, U3]) == [U3]


def test_partial_history() -> None:
    assert new_messages([U1, A1, U2, A2], [A2, U3]) == [U3]


def test_same_text_as_an_old_user_message_is_still_new() -> None:
    assert new_messages([U1, A1], [Message("user", "one")]) == [Message("user", "one")]


def test_retry_of_the_last_question_with_history() -> None:
    assert new_messages([U1, A1, U2, A2], [U1, A1, U2]) == [U2]


def test_whitespace_differences_in_echoed_history_do_not_matter() -> None:
    echoed = Message("assistant", "first answer\n")
    assert new_messages([U1, A1], [U1, echoed, U2]) == [U2]


def test_tool_results_after_a_tool_call() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    asked = Message("assistant", None, tool_calls=[call])
    result = Message("tool", "42", tool_call_id="c1")
    assert new_messages([U1, asked], [result]) == [result]
    assert new_messages([U1, asked], [U1, asked, result]) == [result]


def test_split_system() -> None:
    system = Message("system", "be brief")
    developer = Message("developer", "use JSON")
    assert split_system([system, developer, U1]) == ([system, developer], [U1])
    assert split_system([U1, system]) == ([], [U1, system])


def frames(*events: object) -> bytes:
    return b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def test_accumulator_rebuilds_content_and_tool_calls_across_chunk_boundaries() -> None:
    stream = frames(
        {
            "id": "x",
            "model": "m",
            "created": 1,
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}],
        },
        {"choices": [{"index": 0, "delta": {"content": "lo"}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "get", "arguments": '{"a"'},
                            }
                        ]
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]},
                }
            ]
        },
        {"choices": [{"index": 1, "delta": {"content": "other choice"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}},
    )
    acc = StreamAccumulator()
    for i in range(0, len(stream), 7):  # arbitrary byte boundaries
        acc.feed(stream[i : i + 7])
    assert acc.done and acc.error is None
    assert acc.message() == {
        "role": "assistant",
        "content": "Hello",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get", "arguments": '{"a": 1}'}}
        ],
    }
    assert acc.finish_reason == "tool_calls"
    assert acc.usage == {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}


def test_accumulator_sees_error_frames() -> None:
    acc = StreamAccumulator()
    acc.feed(b'data: {"error": {"message": "boom"}}\n\n')
    assert acc.error == {"message": "boom"} and not acc.done


def test_replay_as_stream_round_trips_through_the_accumulator() -> None:
    acc = StreamAccumulator()
    acc.feed(
        frames(
            {
                "id": "x",
                "model": "m",
                "created": 1,
                "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}],
            }
        )
    )
    completion = completion_from_stream(acc, "m")
    again = StreamAccumulator()
    again.feed(replay_as_stream(completion))
    assert again.done and again.message() == acc.message() == {"role": "assistant", "content": "hi"}
