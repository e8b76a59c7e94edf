"""Typed configs (swerl.configs): what YAML and --set values become, what is refused, what --fields says."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from swerl.configs import field_docs, format_fields, load_config
from swerl.errors import UserError
from swerl.trainers.config import GRPOConfig, SFTConfig
from swerl.trainers.rlef import RLEFConfig

REQUIRED = {"model_name_or_path": "m", "train_file": "t.jsonl"}


def _config(tmp_path: Path, cls: type = GRPOConfig, overrides: tuple[str, ...] = (), **values: object):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({**REQUIRED, **values}))
    return load_config(cls, path, overrides)


def test_yaml_values_are_converted_as_a_yaml_user_expects(tmp_path):
    config = _config(tmp_path, learning_rate="1e-5", max_steps="20", bf16="auto", top_k=None)
    assert config.learning_rate == 1e-5 and isinstance(config.learning_rate, float)
    assert config.max_steps == 20 and isinstance(config.max_steps, int)
    assert config.bf16 == "auto" and config.top_k is None
    assert type(config) is GRPOConfig


def test_set_values_take_the_fields_type(tmp_path):
    config = _config(
        tmp_path,
        overrides=("output_dir=2024", "eval_file=null", "bf16=true", "beta=0.04", "rollout_kwargs={a: 1}"),
        eval_file="e.jsonl",
    )
    assert config.output_dir == "2024"  # text, not the number 2024
    assert config.eval_file is None
    assert config.bf16 is True and config.beta == 0.04 and config.rollout_kwargs == {"a": 1}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"max_steps": 2.5}, "max_steps: input should be a valid integer"),
        ({"max_steps": 0}, "max_steps: input should be greater than or equal to 1"),
        ({"scale_rewards": "grup"}, "scale_rewards: input should be 'group', 'batch' or 'none'"),
        ({"learning_rate": -1e-5}, "learning_rate: input should be greater than 0"),
        ({"top_p": 1.5}, "top_p: input should be less than or equal to 1"),
        ({"epsilon": 1.0}, "epsilon: input should be less than 1"),
        ({"bf16": "sometimes"}, "bf16"),
        ({"num_generations": 1}, "num_generations: must be at least 2"),
        ({"reward": "tokens:5"}, "reward: expected 'similarity'"),
        ({"temperature": 0}, "temperature: must be > 0"),
        ({"model_name_or_path": ""}, "model_name_or_path: required"),
    ],
)
def test_wrong_values_are_refused_naming_file_and_key(tmp_path, values, message):
    with pytest.raises(UserError, match=message) as info:
        _config(tmp_path, **values)
    assert str(tmp_path / "c.yaml") in str(info.value)


def test_all_problems_are_reported_at_once(tmp_path):
    with pytest.raises(UserError) as info:
        _config(tmp_path, max_steps=2.5, scale_rewards="grup")
    assert "max_steps" in str(info.value) and "scale_rewards" in str(info.value)


def test_set_errors_name_the_option(tmp_path):
    with pytest.raises(UserError, match=r"^--set max_steps: input should be a valid integer"):
        _config(tmp_path, overrides=("max_steps=many",))


@pytest.mark.parametrize(
    ("override", "end"),
    [
        ("output_dir=", "'$"),
        ("learning_rate= ", "'$"),
        ("eval_file=", "' \\(write --set eval_file=null to mean none\\)$"),
    ],
)
def test_an_empty_set_value_is_named_as_missing_not_as_none(tmp_path, override, end):
    key = override.partition("=")[0]
    with pytest.raises(UserError, match=rf"^--set {key}=: no value after '={end}"):
        _config(tmp_path, overrides=(override,))


@pytest.mark.parametrize("cls", [GRPOConfig, SFTConfig, RLEFConfig])
def test_every_field_is_documented_for_fields(cls):
    """`--fields` shows each field's meaning from the class docstrings; a field added without one
    would show a bare name."""
    undocumented = [doc.name for doc in field_docs(cls) if not doc.help]
    assert undocumented == []
    assert len(field_docs(cls)) == len(dataclasses.fields(cls))


def test_fields_listing_shows_types_ranges_choices_and_defaults():
    text = format_fields(GRPOConfig)
    assert "max_steps: int >= 1 = 100" in text
    assert "scale_rewards: 'group' | 'batch' | 'none' = 'group'" in text
    assert "epsilon: float >= 0, < 1 = 0.2" in text
    assert "G, answers sampled per prompt" in text
