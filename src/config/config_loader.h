// config/config_loader.h — reads a moe4d YAML config into a Config, and writes one back.
//
// The schema is docs/config.md plus every field of the structs in config/config.h: each field has a
// YAML key of the same name, under the sections `model` (with `model.moe`), `parallel_config`,
// `train` (with `train.loss_scale`), `data` and `checkpoint`. MindFormers spellings are accepted as
// aliases: parallel_config.model_parallel (= tensor_parallel), pipeline_stage (= pipeline_parallel)
// and enable_parallel_optimizer (true = zero_stage 1); giving a key and its alias is an error.
//
// Errors are moe4d::Error with one line, `<source>:<line>: <key.path>: <what is wrong>, expected
// <what>` (lines 1-based), e.g. `demo.yaml:7: model.hidden_size: expected a positive integer, got
// '-3'`; a missing required key is `<source>: missing required key model.hidden_size`.
//
// Only the single-model checks live here (sizes, head_dim, MoE routing, optimiser ranges); whether
// a parallel layout fits the model and the world (divisibility, world size) is checked where the
// rank grid is built. All functions are pure and thread-safe.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace moe4d {

// Reads and validates the YAML file at `path`. Messages name the file as `path` was given.
// `overrides` are `KEY=VALUE` strings (`--set train.lr=3e-4`, in order, the last one wins): each is
// written into the YAML before it is read (a flow list/map value is parsed, null/~/empty is null,
// anything else is the scalar text), so it is checked like the file's keys; an error in one names
// `--set KEY` instead of a line. Setting one of two alias spellings (model_parallel /
// tensor_parallel, ...) replaces the other one in the file.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// Parses and validates YAML text; `source_name` is used in messages and stored in Config::source.
Config parse_config(const std::string& yaml_text, const std::string& source_name,
                    const std::vector<std::string>& overrides = {});

// A YAML document with every field of `config` (except `source`), which parse_config reads back to
// an equal Config. Used to echo the config into checkpoints and by the planner's export.
std::string config_to_yaml(const Config& config);

}  // namespace moe4d
