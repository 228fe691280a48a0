// makemore: a character-level MLP language model (Bengio et al. 2003, as in Karpathy's
// "makemore" lectures) trained on the system word list with Ravel's autograd and the oneTBB
// plugin. Prints progress, the final losses against the unigram baseline, 20 sampled words, and
// writes the loss curve as an SVG file. Under mpirun it trains data-parallel: the same global
// batch split over the ranks (docs/distributed.md); only rank 0 prints and writes files.
//   makemore [--steps N] [--batch N] [--hidden N] [--embed N] [--block N] [--lr X] [--seed N]
//            [--config FILE] [--words FILE] [--out DIR] [--jit on|off] [--dtype f32|bf16|f16]
//            [--bucket-kb N]
// --dtype bf16/f16 trains in mixed precision (docs/nn.md): f32 master weights, the layers in the
// half dtype under nn::Autocast, and for f16 dynamic loss scaling (nn::GradScaler).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "data_parallel.hpp"
#include "dataset.hpp"
#include "ravel/ravel.hpp"
#include "../common/svg.hpp"

using ravel::Tensor;
using namespace makemore;
using chart::Series;
using chart::write_line_chart;

namespace {

struct Options {
  int64_t steps = 150000, batch = 64, hidden = 200, embed = 10;
  int block = 3;
  int64_t bucket_kb = 0;  // data-parallel gradient buckets (0: DataParallel's default, 25 MiB)
  double lr = 0.1;
  uint64_t seed = 42;
  bool jit = true;  // capture the training step once and replay it (ravel/jit.hpp)
  std::optional<ravel::DType> half;  // --dtype bf16|f16: the layers' compute dtype (f32: none)
  std::string config, words = "/usr/share/dict/american-english", out = ".";
};

[[noreturn]] void usage(int code) {
  std::puts(
      "usage: makemore [--steps N] [--batch N] [--hidden N] [--embed N] [--block N] [--lr X] [--seed N]\n"
      "                [--config FILE] [--words FILE] [--out DIR] [--jit on|off] [--dtype f32|bf16|f16]\n"
      "                [--bucket-kb N]\n"
      "Trains a character-level MLP language model on a word list and samples new words.\n"
      "  --dtype   the layers' compute dtype: bf16 or f16 train in mixed precision (f32 master\n"
      "            weights; f16 with dynamic loss scaling)\n"
      "  --bucket-kb  under mpirun: the gradient buckets' size (0: 25 MiB); each bucket's all-reduce\n"
      "               begins while the rest of the backward pass runs\n"
      "Defaults: --steps 150000 --batch 64 --hidden 200 --embed 10 --block 3 --lr 0.1 --seed 42\n"
      "          --words /usr/share/dict/american-english --out . --jit on --dtype f32");
  std::exit(code);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") usage(0);
    if (i + 1 >= argc) { std::fprintf(stderr, "makemore: %s needs a value\n", a.c_str()); usage(2); }
    std::string v = argv[++i];
    try {
      if (a == "--steps") o.steps = std::stoll(v);
      else if (a == "--batch") o.batch = std::stoll(v);
      else if (a == "--hidden") o.hidden = std::stoll(v);
      else if (a == "--embed") o.embed = std::stoll(v);
      else if (a == "--block") o.block = std::stoi(v);
      else if (a == "--lr") o.lr = std::stod(v);
      else if (a == "--seed") o.seed = std::stoull(v);
      else if (a == "--bucket-kb") o.bucket_kb = std::stoll(v);
      else if (a == "--config") o.config = v;
      else if (a == "--words") o.words = v;
      else if (a == "--out") o.out = v;
      else if (a == "--jit" && (v == "on" || v == "off")) o.jit = v == "on";
      else if (a == "--jit") throw std::invalid_argument(v);
      else if (a == "--dtype" && (v == "f32" || v == "bf16" || v == "f16"))
        o.half = v == "f32"    ? std::nullopt
                 : v == "bf16" ? std::optional<ravel::DType>(ravel::DType::BF16)
                               : std::optional<ravel::DType>(ravel::DType::F16);
      else if (a == "--dtype") {
        std::fprintf(stderr, "makemore: bad value '%s' for --dtype (expected f32, bf16 or f16)\n", v.c_str());
        usage(2);
      }
      else { std::fprintf(stderr, "makemore: unknown option %s\n", a.c_str()); usage(2); }
    } catch (const std::logic_error&) {
      std::fprintf(stderr, "makemore: bad value '%s' for %s\n", v.c_str(), a.c_str());
      usage(2);
    }
  }
  if (o.bucket_kb < 0) {
    std::fprintf(stderr, "makemore: --bucket-kb must be 0 or positive\n");
    usage(2);
  }
  if (o.steps < 1 || o.batch < 1 || o.hidden < 1 || o.embed < 1 || o.block < 1 || o.lr <= 0) {
    std::fprintf(stderr, "makemore: sizes, steps and the learning rate must be positive\n");
    usage(2);
  }
  return o;
}

struct Model {
  ravel::nn::Embedding emb;
  ravel::nn::Linear hidden, out;
  int block;
  Model(const Options& o)
      : emb(kVocab, o.embed, o.seed), hidden(o.block * o.embed, o.hidden, o.seed + 1), out(o.hidden, kVocab, o.seed + 2),
        block(o.block) {}
  // contexts [N, block] (i64) -> logits [N, 27]
  Tensor operator()(const Tensor& contexts) const {
    Tensor e = emb(contexts);  // [N, block, embed]
    return out(hidden(e.reshape({contexts.size(0), -1})).tanh());
  }
  std::vector<Tensor*> parameters() {
    return {&emb.weight, &hidden.weight, &hidden.bias, &out.weight, &out.bias};
  }
};

// Mean loss over a whole split, in chunks so no intermediate grows past a few MB.
// The model's compute dtype for the rest of the scope: none for f32 (docs/nn.md, Mixed precision).
ravel::nn::Autocast autocast_for(const Options& o) {
  return ravel::nn::Autocast(o.half.value_or(ravel::DType::BF16), o.half.has_value());
}

double evaluate(const Model& m, const Examples& ex, int block, const Options& o) {
  ravel::NoGradGuard no_grad;
  const ravel::nn::Autocast autocast = autocast_for(o);
  const int64_t chunk = 20000;
  double total = 0;
  for (int64_t s = 0; s < ex.size(); s += chunk) {
    int64_t n = std::min(chunk, ex.size() - s);
    std::vector<int64_t> ctx(ex.contexts.begin() + s * block, ex.contexts.begin() + (s + n) * block);
    std::vector<int64_t> tgt(ex.targets.begin() + s, ex.targets.begin() + s + n);
    // On a config's mesh each device evaluates its share of the chunk (any split of it will do).
    const std::vector<ravel::Device> mesh = ravel::Runtime::get().mesh();
    Tensor c = Tensor::from_vector(ctx, {n, block}), t = Tensor::from_vector(tgt, {n});
    if (mesh.size() > 1) c = c.shard(mesh), t = t.shard(mesh);
    Tensor loss = ravel::nn::cross_entropy(m(c), t);
    total += loss.item<double>() * static_cast<double>(n);
  }
  return total / static_cast<double>(ex.size());
}

std::string sample_word(const Model& m, int block, std::mt19937_64& rng, const Options& o) {
  ravel::NoGradGuard no_grad;
  const ravel::nn::Autocast autocast = autocast_for(o);
  std::vector<int64_t> ctx(block, 0);
  std::string word;
  for (int len = 0; len < 30; ++len) {
    auto probs = ravel::nn::autocast_f32(m(Tensor::from_vector(ctx, {1, block}))).softmax(-1).to_vector<double>();
    std::discrete_distribution<int> pick(probs.begin(), probs.end());
    int next = pick(rng);
    if (next == 0) break;
    word += itos(next);
    ctx.erase(ctx.begin());
    ctx.push_back(next);
  }
  return word;
}

}  // namespace

int main(int argc, char** argv) try {
  Options o = parse(argc, argv);
  if (!o.config.empty()) {
    ravel::RuntimeOptions ro;
    ro.config_path = o.config;
    ravel::Runtime::reset(ro);
  }
  // Under mpirun (or another launcher) the ranks train together; without one this is a world of
  // one and nothing below changes (ravel/distributed.hpp).
  const ravel::distributed::World& world = ravel::distributed::init();
  const bool parallel = !world.launcher.empty();
  if (parallel && o.batch < world.size) {
    std::fprintf(stderr, "makemore: --batch %lld is smaller than the %d ranks\n", static_cast<long long>(o.batch), world.size);
    return 2;
  }
  // Only rank 0 prints (errors still reach stderr from every rank) and writes files.
  if (world.rank != 0 && !std::freopen("/dev/null", "w", stdout)) return 1;
  const int64_t lo = o.batch * world.rank / world.size, hi = o.batch * (world.rank + 1) / world.size;
  if (parallel)
    std::printf("data-parallel: %d rank%s over %s %s, launched by %s; global batch %lld split %lld..%lld per rank\n",
                world.size, world.size == 1 ? "" : "s", world.communicator.c_str(), world.version.c_str(), world.launcher.c_str(),
                static_cast<long long>(o.batch), static_cast<long long>(o.batch / world.size),
                static_cast<long long>((o.batch + world.size - 1) / world.size));
  // A mesh in the config (its "parallel" section, e.g. configs/data-parallel.json): the same
  // program, data-parallel over those devices: parameters replicated, every batch split.
  const std::vector<ravel::Device> mesh = ravel::Runtime::get().mesh();
  if (mesh.size() > 1) {
    if (parallel) {
      std::fprintf(stderr, "makemore: a config mesh under a launcher (ranks x devices) is not supported yet; "
                           "use one or the other\n");
      return 2;
    }
    std::string names;
    for (const auto& d : mesh) names += (names.empty() ? "" : ", ") + d.str();
    std::printf("data-parallel over a mesh of %zu devices (%s, from %s): global batch %lld split along axis %lld\n",
                mesh.size(), names.c_str(), ravel::Runtime::get().config_source().c_str(),
                static_cast<long long>(o.batch), static_cast<long long>(ravel::Runtime::get().mesh_batch_axis()));
  }
  std::vector<std::string> words = load_words(o.words, o.seed);
  const size_t n_train = words.size() * 9 / 10;
  Examples train = make_examples({words.begin(), words.begin() + n_train}, o.block);
  Examples val = make_examples({words.begin() + n_train, words.end()}, o.block);
  Model model(o);
  for (Tensor* p : model.parameters()) p->assign(ravel::replicate_on_mesh(*p));  // itself without a mesh
  int64_t n_params = 0;
  for (Tensor* p : model.parameters()) n_params += p->numel();
  std::printf("makemore on %s: %zu words (%zu train, %zu validation), %lld / %lld examples\n",
              ravel::Runtime::get().default_device().str().c_str(), words.size(), n_train, words.size() - n_train,
              static_cast<long long>(train.size()), static_cast<long long>(val.size()));
  std::printf("model: context %d chars -> embedding %lld -> tanh hidden %lld -> 27 logits (%lld parameters)\n", o.block,
              static_cast<long long>(o.embed), static_cast<long long>(o.hidden), static_cast<long long>(n_params));
  std::printf("training %lld steps, batch %lld, SGD lr %.3g (x0.1 for the last quarter)%s\n\n",
              static_cast<long long>(o.steps), static_cast<long long>(o.batch), o.lr,
              !o.half ? ""
              : *o.half == ravel::DType::BF16 ? "; mixed precision: bf16 layers, f32 weights"
                                              : "; mixed precision: f16 layers, f32 weights, dynamic loss scaling");

  ravel::nn::SGD sgd(model.parameters(), o.lr);
  // Dynamic loss scaling for f16 (bf16 has f32's exponent range), as torch.amp.GradScaler(enabled=
  // dtype == float16); disabled, scale() is the loss and step() is sgd.step().
  ravel::nn::GradScaler::Options scaling;
  scaling.enabled = o.half == ravel::DType::F16;
  ravel::nn::GradScaler scaler(scaling);
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int64_t> pick(0, train.size() - 1);
  Series curve{"train loss (batch, smoothed)", "#1f77b4", {}};
  const bool tty = isatty(STDOUT_FILENO);
  const int64_t log_every = std::max<int64_t>(1, o.steps / 20);
  double smooth = 0;
  auto start = std::chrono::steady_clock::now();
  std::vector<int64_t> ctx(o.batch * o.block), tgt(o.batch);
  // One training step as a function of the batch; with --jit on, its kernels are captured at
  // the first call and replayed afterwards (no graph, autodiff or scheduling per step).
  const ravel::Jit::Function step_fn = [&](const std::vector<Tensor>& in) {
    Tensor loss;
    {
      const ravel::nn::Autocast autocast = autocast_for(o);  // --dtype (captured with the step)
      loss = ravel::nn::cross_entropy(model(in[0]), in[1]);
    }
    sgd.zero_grad();
    scaler.scale(loss).backward();
    scaler.step(sgd, {loss});  // the loss in the same pass: one forward pass per step
    scaler.update();
    sgd.zero_grad();  // no gradient outlives the step (a replay would not update it)
    return std::vector<Tensor>{loss};
  };
  std::vector<Tensor*> jit_state = model.parameters();
  if (scaler.is_enabled())
    for (Tensor* t : scaler.state()) jit_state.push_back(t);
  ravel::Jit train_step(step_fn, jit_state);
  std::unique_ptr<DataParallelStep> ddp_step;  // with several ranks: rows [lo, hi) of each batch
  if (parallel)
    ddp_step = std::make_unique<DataParallelStep>(
        model.parameters(),
        [&](const Tensor& c, const Tensor& t) {
          const ravel::nn::Autocast autocast = autocast_for(o);
          return ravel::nn::cross_entropy(model(c), t);
        },
        static_cast<double>(hi - lo) / static_cast<double>(o.batch), o.jit, static_cast<size_t>(o.bucket_kb) * 1024,
        o.half == ravel::DType::F16);
  ravel::reset_stats();
  for (int64_t step = 1; step <= o.steps; ++step) {
    for (int64_t b = 0; b < o.batch; ++b) {
      int64_t i = pick(rng);
      std::copy_n(train.contexts.begin() + i * o.block, o.block, ctx.begin() + b * o.block);
      tgt[b] = train.targets[i];
    }
    const double lr = step > o.steps * 3 / 4 ? o.lr * 0.1 : o.lr;
    if (lr != sgd.lr) train_step.clear();  // the learning rate is a constant of the capture
    sgd.lr = lr;
    double l;
    if (ddp_step) {  // every rank drew the same global batch; this one trains on its rows
      std::vector<int64_t> c(ctx.begin() + lo * o.block, ctx.begin() + hi * o.block), t(tgt.begin() + lo, tgt.begin() + hi);
      l = (*ddp_step)(Tensor::from_vector(c, {hi - lo, o.block}), Tensor::from_vector(t, {hi - lo}), lr);
    } else {
      std::vector<Tensor> batch{ravel::shard_batch(Tensor::from_vector(ctx, {o.batch, o.block})),
                                ravel::shard_batch(Tensor::from_vector(tgt, {o.batch}))};
      l = (o.jit ? train_step(batch) : step_fn(batch))[0].item<double>();
    }
    smooth = step == 1 ? l : 0.98 * smooth + 0.02 * l;
    if (step % std::max<int64_t>(1, o.steps / 400) == 0 || step == 1) curve.points.emplace_back(step, smooth);
    if (step % log_every == 0 || step == o.steps || (tty && step % 50 == 0)) {
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      int filled = static_cast<int>(30.0 * step / o.steps);
      std::printf("%sstep %6lld/%lld [%s%s] loss %.4f (smoothed %.4f) | %.0f steps/s%s", tty ? "\r" : "",
                  static_cast<long long>(step), static_cast<long long>(o.steps), std::string(filled, '#').c_str(),
                  std::string(30 - filled, '.').c_str(), l, smooth, step / secs, tty ? "" : "\n");
      std::fflush(stdout);
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (tty) std::printf("\n");
  const ravel::KernelStats st = ravel::cumulative_stats();
  std::printf("\ntrained in %.1f s (%.0f steps/s); per step: %.1f kernels (%.1f contractions), %.0f us scheduling, %.0f us in kernels\n",
              secs, o.steps / secs, double(st.kernels()) / o.steps, double(st.contractions) / o.steps,
              st.schedule_seconds / o.steps * 1e6, st.execute_seconds / o.steps * 1e6);
  if (o.jit && !ddp_step)
    std::printf("jit: %lld steps replayed, %lld captured\n", static_cast<long long>(train_step.replays()),
                static_cast<long long>(train_step.captures()));
  if (o.jit && ddp_step)
    std::printf("jit: %lld steps replayed, %lld captured (the all-reduce inside)\n",
                static_cast<long long>(ddp_step->replays()), static_cast<long long>(ddp_step->captures()));
  if (ddp_step && ddp_step->loss_scaling()) std::printf("loss scale at the end: %g\n", ddp_step->loss_scale());
  else if (scaler.is_enabled()) std::printf("loss scale at the end: %g\n", scaler.get_scale());
  if (world.rank != 0) return 0;  // the model is the same on every rank: rank 0 evaluates and writes

  double train_loss = evaluate(model, train, o.block, o), val_loss = evaluate(model, val, o.block, o);
  double baseline = unigram_baseline(train, val);
  std::printf("final loss: train %.4f, validation %.4f (unigram baseline %.4f, uniform %.4f)\n", train_loss, val_loss,
              baseline, std::log(27.0));

  std::printf("\n20 sampled words:\n");
  std::mt19937_64 srng(o.seed + 7);
  for (int i = 0; i < 20; ++i) std::printf("  %s\n", sample_word(model, o.block, srng, o).c_str());

  std::filesystem::create_directories(o.out);
  std::string svg = (std::filesystem::path(o.out) / "makemore-loss.svg").string();
  Series base{"unigram baseline (validation)", "#d62728", {{1, baseline}, {static_cast<double>(o.steps), baseline}}};
  Series valp{"final validation loss", "#2ca02c", {{1, val_loss}, {static_cast<double>(o.steps), val_loss}}};
  write_line_chart(svg, "makemore: training loss", "step", "cross-entropy (nats)", {curve, base, valp});
  std::printf("\nloss curve written to %s\n", std::filesystem::absolute(svg).string().c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "makemore: %s\n", e.what());
  return 1;
}
