// cli/cmd_ckpt_hf.cc — `moe4d ckpt export CKPT --format hf OUTDIR` and
// `moe4d ckpt import --format hf INDIR --output CKPT --data SHARD` (interop/hf_export.h).
//
// The `ckpt` subcommand may already exist (inspect / verify / list live in their own file); these
// two are added to it, or it is created.
#include <fmt/format.h>

#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "interop/hf_export.h"

namespace moe4d {
namespace {

struct ExportArgs {
  std::string checkpoint;
  std::string format;
  std::string output;
  std::string tokenizer;
  std::string max_shard_size = "5GB";
  std::string dtype = "fp32";
};

struct ImportArgs {
  std::string input;
  std::string format;
  std::string output;
  std::string data;
  std::string tokenizer;
};

// "5GB", "200MB", "10KB", "1234": decimal units as save_pretrained's max_shard_size.
uint64_t parse_size(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "KB") scale = 1e3;
  else if (unit == "MB") scale = 1e6;
  else if (unit == "GB") scale = 1e9;
  if (used == 0 || scale == 0 || !(value > 0))
    fail("--max-shard-size '{}' is not a size, expected e.g. 5GB, 200MB, 64KB or a byte count", text);
  return static_cast<uint64_t>(value * scale);
}

void check_format(const std::string& format) {
  if (format != "hf") fail("--format '{}' is not supported, expected hf (Hugging Face transformers)", format);
}

CLI::App* ckpt_command(CLI::App& app) {
  const auto found = app.get_subcommands([](CLI::App* sub) { return sub->get_name() == "ckpt"; });
  if (!found.empty()) return found.front();
  CLI::App* ckpt = app.add_subcommand("ckpt", "inspect, verify, list, export and import checkpoints");
  ckpt->require_subcommand(1);
  return ckpt;
}

}  // namespace

void add_ckpt_hf_commands(CLI::App& app) {
  CLI::App* ckpt = ckpt_command(app);

  auto ex = std::make_shared<ExportArgs>();
  CLI::App* export_cmd = ckpt->add_subcommand("export", "write a checkpoint as a Hugging Face model folder");
  export_cmd->add_option("checkpoint", ex->checkpoint, "checkpoint step directory, or checkpoint dir (follows latest)")
      ->required();
  export_cmd->add_option("output", ex->output, "new (or empty) output directory")->required();
  export_cmd->add_option("--format", ex->format, "output format: hf")->required();
  export_cmd->add_option("--tokenizer", ex->tokenizer, "tokenizer spec (default: the one the model was trained with)");
  export_cmd->add_option("--max-shard-size", ex->max_shard_size,
                         "largest model.safetensors shard before splitting, as save_pretrained (default 5GB)");
  export_cmd->add_option("--dtype", ex->dtype, "tensor dtype: fp32 (exact, default) or bf16 (rounded to nearest even)");
  export_cmd->callback([ex] {
    check_format(ex->format);
    if (ex->dtype != "fp32" && ex->dtype != "bf16")
      fail("--dtype '{}' is not supported, expected fp32 or bf16", ex->dtype);
    HfExportOptions options{.checkpoint = ex->checkpoint, .output_dir = ex->output,
                            .max_shard_bytes = parse_size(ex->max_shard_size), .tokenizer = ex->tokenizer,
                            .dtype = ex->dtype == "bf16" ? DType::kBF16 : DType::kF32};
    const HfExportResult r = export_hf(options);
    log_info("exported {} as {} to {} ({} files, {:.1f} MB of tensors)", ex->checkpoint,
             hf_architecture_name(r.arch), ex->output, r.files.size(), double(r.tensor_bytes) / 1e6);
  });

  auto im = std::make_shared<ImportArgs>();
  CLI::App* import_cmd = ckpt->add_subcommand("import", "read a Hugging Face model folder into a moe4d checkpoint");
  import_cmd->add_option("input", im->input, "Hugging Face model folder (config.json + safetensors)")->required();
  import_cmd->add_option("--format", im->format, "input format: hf")->required();
  import_cmd->add_option("--output", im->output, "new checkpoint directory (step_00000000 and config.yaml inside)")
      ->required();
  import_cmd->add_option("--data", im->data, "token shard that the written config.yaml trains on (data.train)")
      ->required();
  import_cmd->add_option("--tokenizer", im->tokenizer,
                         "data.tokenizer of the written config and the checkpoint's tokenizer (default: the folder's "
                         "tokenizer.model, else its tokenizer.json, copied)");
  import_cmd->callback([im] {
    check_format(im->format);
    const HfImportResult r = import_hf(
        {.input_dir = im->input, .output = im->output, .train_data = im->data, .tokenizer = im->tokenizer});
    log_info("imported {} ({}) into {}; config {} (train.init_from starts training from it)", im->input,
             hf_architecture_name(r.arch), r.checkpoint_path, r.config_path);
  });
}

}  // namespace moe4d
