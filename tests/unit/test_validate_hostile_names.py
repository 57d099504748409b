"""Names a hostile or careless spec gets wrong: states whose job names would be one (spec/job_names.py), bucket
names S3 refuses (spec/buckets.py), run ids (protocol/run_ids.py) and an empty AWS region variable."""

from __future__ import annotations

import pytest

from npa_workflow.adapters.aws_clients import forget_blank_regions
from npa_workflow.protocol.run_ids import run_id_problem
from npa_workflow.render.names import launch_job_name
from npa_workflow.spec.buckets import bucket_name_problem
from npa_workflow.spec.job_names import job_label

TWO = 'states:\n  "{a}": {{run: {{shell: x}}, next: "{b}"}}\n  "{b}": {{run: {{shell: y}}, terminal: true}}\n'


# --- job names ------------------------------------------------------------------------------
@pytest.mark.parametrize(("first", "second", "first_shown"), [
    ("Train", "train", "Train"),  # case
    ("train model", "train-model", "train model"),  # sanitising
    ("train.model", "train-model", "train.model"),
    ("ｔｒａｉｎ", "train", "ｔｒａｉｎ"),  # NFKC: full-width letters
    ("tr\u200bain", "train", "tr\\u200bain"),  # a zero-width space, shown as its escape
    ("train\u2060", "train", "train\\u2060"),  # a word joiner
    ("\u202etrain", "train", "\\u202etrain"),  # a bidi override
    ("train-", "train", "train-"),  # a trailing '-' is cut from the job name
    ("train-a2", "train", "train-a2"),  # the second attempt of `train`
])
def test_states_whose_job_names_collide_are_rejected_naming_both(spec_error, first, second, first_shown):
    [problem] = spec_error(TWO.format(a=first, b=second)).problems
    assert problem.path in (f"states.{first}", f"states.{second}")
    assert f"'{first_shown}'" in problem.message and f"'{second}'" in problem.message, problem.message
    assert "rename" in problem.hint


def test_a_state_named_like_a_later_loop_round_of_another_is_rejected(spec_error):
    body = ("states:\n  train: {run: {shell: x}, loop: {max: 3}, next: train-train2}\n"
            "  train-train2: {run: {shell: y}, terminal: true}\n")
    [problem] = spec_error(body).problems
    assert "later round or retry of state 'train'" in problem.message


def test_names_that_only_look_alike_are_fine_and_keep_their_readable_form(load):
    load(TWO.format(a="train", b="train2"))
    load(TWO.format(a="prep", b="prepare"))
    assert job_label("Ｔrain\u200b Model") == "train-model"
    assert launch_job_name("r1", "Ｔrain\u200b", {}, 1) == launch_job_name("r1", "train", {}, 1) == "r1-01-train"


def test_groups_and_routers_launch_no_job_so_their_names_never_collide(load):
    load("states:\n  Fan: {parallel: [fan], next: done}\n  fan: {run: {shell: x}}\n  done: {terminal: true}\n")


# --- bucket names ---------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "reason"), [
    ("b", "is 1 characters long"),
    ("x" * 64, "is 64 characters long"),
    ("My-Bucket", "holds 'B', 'M'"),
    ("my_bucket", "holds '_'"),
    ("-bucket", "must start and end"),
    ("bucket.", "must start and end"),
    ("my..bucket", "two adjacent periods"),
    ("192.168.5.4", "IP address"),
    ("xn--bucket", "starts with 'xn--'"),
    ("sthree-bucket", "starts with 'sthree-'"),
    ("bucket-s3alias", "ends with '-s3alias'"),
    ("bucket--ol-s3", "ends with '--ol-s3'"),
])
def test_bucket_names_s3_refuses(name, reason):
    assert reason in (bucket_name_problem(name) or "")


@pytest.mark.parametrize("name", ["abc", "my-bucket.data", "npa-workflow-local", "a" * 63, "1bucket2"])
def test_legal_bucket_names(name):
    assert bucket_name_problem(name) is None


@pytest.mark.parametrize(("config", "path"), [
    ("{bucket: b}", "config.bucket"),
    ("{bucket: Data_Lake}", "config.bucket"),
    ("{data_bucket: 's3://xn--x/prefix'}", "config.data_bucket"),
    ("{root: ab, bucket: '{{config.root}}'}", "config.bucket"),
])
def test_validate_refuses_a_config_bucket_s3_would_refuse(errors, config, path):
    [(where, message)] = errors(f"config: {config}\nstates:\n  a: {{run: {{shell: x}}, terminal: true}}\n")
    assert where == path and "is not a legal S3 bucket name" in message


def test_a_bucket_named_from_the_run_id_is_checked_at_run_time_not_validate(load):
    load("config: {bucket: 'data-{{run.id}}'}\nstates:\n  a: {run: {shell: x}, terminal: true}\n")


# --- run ids --------------------------------------------------------------------------------
def test_a_run_id_over_the_limit_says_its_length():
    problem = run_id_problem("r" * 73)
    assert problem is not None and "73 characters long, over the 72 allowed" in problem


def test_an_empty_run_id_is_refused_not_replaced():
    assert "the run id is empty" in (run_id_problem("") or "")


def test_a_huge_run_id_is_shown_shortened():
    problem = run_id_problem("x" * 100_000) or ""
    assert "100000 characters long" in problem and len(problem) < 600


def test_run_refuses_an_empty_run_id(tmp_path):
    from typer.testing import CliRunner

    from npa_workflow.cli.app import app

    spec = tmp_path / "s.yaml"
    spec.write_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: s}\n"
                    "states:\n  a: {run: {shell: 'true'}, terminal: true}\n")
    done = CliRunner().invoke(app, ["run", str(spec), "--run-id", ""])
    assert done.exit_code == 2 and "the run id is empty" in done.output
    assert not (tmp_path / ".npa-workflow").exists()


# --- regions --------------------------------------------------------------------------------
def test_an_empty_region_variable_is_unset_and_a_real_one_kept():
    env = {"AWS_REGION": "", "AWS_DEFAULT_REGION": "  ", "AWS_PROFILE": ""}
    forget_blank_regions(env)
    assert env == {"AWS_PROFILE": ""}
    env = {"AWS_REGION": "eu-west-1"}
    forget_blank_regions(env)
    assert env == {"AWS_REGION": "eu-west-1"}


# --- large groups ---------------------------------------------------------------------------
def test_a_group_above_the_member_limit_is_refused_and_one_at_it_accepted(load, spec_error):
    from npa_workflow.spec.validate import MAX_GROUP_MEMBERS

    def spec(n: int) -> str:
        members = ", ".join(f"m{i}" for i in range(n))
        body = "".join(f"  m{i}: {{run: {{shell: x}}}}\n" for i in range(n))
        return f"states:\n  g: {{parallel: [{members}], next: done}}\n{body}  done: {{terminal: true}}\n"

    load(spec(MAX_GROUP_MEMBERS))
    [problem] = spec_error(spec(MAX_GROUP_MEMBERS + 1)).problems
    assert problem.path == "states.g.parallel"
    assert f"has {MAX_GROUP_MEMBERS + 1:,} members, over the {MAX_GROUP_MEMBERS:,}" in problem.message
    assert "split it" in problem.hint
