"""HFEngine on a tiny Llama: the sampler's log-probs are the trainer's log-probs of the sampled tokens."""

from __future__ import annotations

import pytest
import torch

from swerl.algorithms import token_logprobs
from swerl.models import build_tiny_model, load_model_and_tokenizer
from swerl.rollout import Completion, HFEngine, RolloutEngine, SamplingParams
from swerl.rollout.base import generate_groups
from swerl.rollout.sampling import filter_top_k, filter_top_p, mix_seed


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    corpus = ["def add(a, b):\n    return a + b\n" * 50, "class A:\n    pass\n" * 50]
    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", vocab_size=400, corpus=corpus, seed=3)
    model, tokenizer = load_model_and_tokenizer(path)
    return model, tokenizer


@pytest.fixture(scope="module")
def prompts(tiny):
    _, tok = tiny
    texts = ["def add(a, b):", "class A:\n    pass\n" * 3, "x", "return a + b\n" * 2]
    return [tok(t)["input_ids"] for t in texts]


def teacher_forced(model, completion: Completion, temperature: float) -> torch.Tensor:
    ids = torch.tensor([completion.prompt_ids + completion.token_ids])
    with torch.no_grad():
        logits = model(ids).logits[:, len(completion.prompt_ids) - 1 : -1]
    return token_logprobs(logits, torch.tensor([completion.token_ids]), temperature)[0]


@pytest.mark.parametrize(("temperature", "top_k", "top_p"), [(1.0, 0, 1.0), (0.7, 20, 0.9), (0.0, 0, 1.0)])
def test_logprobs_equal_teacher_forced_forward(tiny, prompts, temperature, top_k, top_p):
    model, tok = tiny
    engine = HFEngine(model, tok, batch_size=8)
    params = SamplingParams(n=2, temperature=temperature, top_k=top_k, top_p=top_p, max_new_tokens=24, seed=5)
    groups = engine.generate(prompts, params)
    assert [len(g) for g in groups] == [2] * len(prompts)
    for prompt, group in zip(prompts, groups, strict=True):
        for c in group:
            assert c.prompt_ids == prompt
            assert 1 <= len(c.token_ids) == len(c.logprobs) <= 24
            expected = teacher_forced(model, c, temperature or 1.0)
            torch.testing.assert_close(torch.tensor(c.logprobs), expected, atol=1e-4, rtol=0)


def test_padding_and_batch_composition_do_not_change_results(tiny, prompts):
    model, tok = tiny
    params = SamplingParams(n=3, max_new_tokens=16, seed=11)
    together = HFEngine(model, tok, batch_size=12).generate(prompts, params)
    one_by_one = HFEngine(model, tok, batch_size=1).generate(prompts, params)
    alone = HFEngine(model, tok, batch_size=4).generate(prompts[:1], params)  # no padding at all
    for a, b in zip(together, one_by_one, strict=True):
        for ca, cb in zip(a, b, strict=True):
            assert ca.token_ids == cb.token_ids
            torch.testing.assert_close(
                torch.tensor(ca.logprobs), torch.tensor(cb.logprobs), atol=1e-5, rtol=0
            )
    assert [c.token_ids for c in alone[0]] == [c.token_ids for c in together[0]]


def test_seeds_reproduce_and_differ(tiny, prompts):
    model, tok = tiny
    engine = HFEngine(model, tok)

    def run(seed):
        groups = engine.generate(prompts, SamplingParams(n=2, max_new_tokens=12, seed=seed))
        return [c.token_ids for g in groups for c in g]

    assert run(1) == run(1)
    assert run(1) != run(2)
    torch.manual_seed(0)
    a = run(None)
    torch.manual_seed(0)
    assert run(None) == a  # unseeded calls follow torch's global RNG
    samples = run(1)
    assert samples[0] != samples[1]  # the n samples of a group are different streams


def test_eos_stops_and_is_kept(tiny, prompts):
    model, tok = tiny
    engine = HFEngine(model, tok)
    greedy = engine.generate(prompts[:1], SamplingParams(temperature=0, max_new_tokens=6))[0][0]
    assert greedy.finish_reason == "length" and len(greedy.token_ids) == 6
    # Make the 3rd greedy token a stop token: generation ends there and keeps it as the last id.
    stop = greedy.token_ids[2]
    first = greedy.token_ids.index(stop)
    stopped = engine.generate(
        prompts[:1], SamplingParams(temperature=0, max_new_tokens=6, stop_token_ids=(stop,))
    )
    c = stopped[0][0]
    assert c.finish_reason == "stop"
    assert c.token_ids == greedy.token_ids[: first + 1]
    assert c.text == tok.decode(c.token_ids[:-1], skip_special_tokens=True)
    # The EOS token itself stops generation: wrap the model so that EOS always wins.
    out = HFEngine(_EosModel(model, tok.eos_token_id), tok).generate(
        prompts, SamplingParams(n=2, max_new_tokens=5, seed=0)
    )
    for group in out:
        for c in group:
            assert c.token_ids == [tok.eos_token_id] and c.finish_reason == "stop" and c.text == ""


class _EosModel(torch.nn.Module):
    """Wraps a causal LM so that EOS gets a huge logit: every sample must stop at the first token."""

    def __init__(self, inner, eos_id):
        super().__init__()
        self.inner = inner
        self.config = inner.config
        self.generation_config = inner.generation_config
        self.eos_id = eos_id

    def forward(self, cache=None, logits_to_keep=0, **kwargs):
        out = self.inner(cache=cache, logits_to_keep=logits_to_keep, **kwargs)
        out.logits[..., self.eos_id] += 100.0
        return out


def test_engine_protocol_training_mode_and_sync(tiny, prompts):
    model, tok = tiny
    engine = HFEngine(model, tok)
    assert isinstance(engine, RolloutEngine)
    model.train()
    engine.generate(prompts[:1], SamplingParams(max_new_tokens=2, seed=0))
    assert model.training  # restored
    model.eval()
    engine.sync_weights(model)  # colocated: shared module, nothing to do
    other, _ = load_model_and_tokenizer(model.name_or_path)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.01)
    copy_engine = HFEngine(load_model_and_tokenizer(model.name_or_path)[0], tok)
    copy_engine.sync_weights(other)
    for a, b in zip(copy_engine.model.parameters(), other.parameters(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(ValueError):
        engine.generate([[]], SamplingParams())


@pytest.mark.parametrize(
    ("top_k", "top_p", "expected"),
    [
        (0, 1.0, [0.5, 0.3, 0.2]),
        (2, 1.0, [0.625, 0.375, 0.0]),
        (0, 0.7, [0.625, 0.375, 0.0]),
        (0, 0.4, [1, 0, 0]),
    ],
)
def test_sampler_draws_from_the_filtered_distribution(top_k, top_p, expected):
    rows = 4000
    logits = torch.tensor([[0.5, 0.3, 0.2]]).log().expand(rows, 3)
    generators = [torch.Generator().manual_seed(mix_seed(9, r)) for r in range(rows)]
    params = SamplingParams(temperature=1.0, top_k=top_k, top_p=top_p)
    tokens, logprobs = HFEngine._sample(logits, params, generators, torch.empty(rows, 3))
    freq = torch.bincount(tokens, minlength=3).float() / rows
    torch.testing.assert_close(freq, torch.tensor(expected, dtype=torch.float32), atol=0.03, rtol=0)
    # reported log-probs are those of the unfiltered distribution
    torch.testing.assert_close(logprobs, torch.tensor([0.5, 0.3, 0.2]).log()[tokens])
    # temperature 2: p ~ sqrt([0.5, 0.3, 0.2])
    hot, hot_lp = HFEngine._sample(logits, SamplingParams(temperature=2.0), generators, torch.empty(rows, 3))
    hot_p = torch.tensor([0.5, 0.3, 0.2]).sqrt() / torch.tensor([0.5, 0.3, 0.2]).sqrt().sum()
    torch.testing.assert_close(torch.bincount(hot, minlength=3).float() / rows, hot_p, atol=0.03, rtol=0)
    torch.testing.assert_close(hot_lp, hot_p.log()[hot])


def test_filters_and_seed_mixing():
    logits = torch.tensor([[1.0, 3.0, 2.0, 0.0]])
    assert torch.isinf(filter_top_k(logits, 2)).tolist() == [[True, False, False, True]]
    assert torch.equal(filter_top_k(logits, 0), logits)
    # softmax([3, 2, 1, 0]) = [0.644, 0.237, 0.087, 0.032]: top_p 0.6 keeps one token, 0.7 two, 0.9 three.
    for top_p, kept in [(0.6, 1), (0.7, 2), (0.9, 3), (1.0, 4)]:
        assert int(torch.isfinite(filter_top_p(logits, top_p)).sum()) == kept
    assert torch.isfinite(filter_top_p(logits, 0.6))[0, 1]
    assert len({mix_seed(7, i, j) for i in range(20) for j in range(20)}) == 400
    assert mix_seed(0, 1, 0) != mix_seed(0, 0, 1)
    assert 0 <= mix_seed(2**70, -1) < 2**63


def test_sampling_params_validation():
    assert SamplingParams(stop_token_ids=[3, 4]).stop_token_ids == (3, 4)
    assert SamplingParams(temperature=0).greedy
    for bad in ({"n": 0}, {"temperature": -1}, {"top_p": 0}, {"top_k": -1}, {"max_new_tokens": 0}):
        with pytest.raises(ValueError):
            SamplingParams(**bad)


def test_groups_arrive_one_decoding_batch_at_a_time(tiny, prompts):
    """`generate_groups` yields each batch as it is decoded (length-sorted order), with `generate`'s
    completions; an engine without the method falls back to one `generate` call."""
    model, tok = tiny
    params = SamplingParams(n=2, max_new_tokens=8, seed=4)
    engine = HFEngine(model, tok, batch_size=2)  # one prompt per batch
    model.train()
    arrived = list(engine.generate_groups(prompts, params))
    assert model.training and not torch.is_inference_mode_enabled()  # restored after the last batch
    model.eval()
    shortest_first = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    assert [i for i, _ in arrived] == shortest_first
    together = HFEngine(model, tok, batch_size=8).generate(prompts, params)
    expected = [[c.token_ids for c in g] for g in together]
    assert [[c.token_ids for c in g] for _, g in sorted(arrived, key=lambda x: x[0])] == expected

    class WholeBatch:
        def generate(self, prompts_, params_):
            return engine.generate(prompts_, params_)

    fallback = list(generate_groups(WholeBatch(), prompts, params))
    assert [i for i, _ in fallback] == [0, 1, 2, 3]
    assert [[c.token_ids for c in g] for _, g in fallback] == expected
