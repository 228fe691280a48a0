// fashion_mnist: a small convolutional network trained on Fashion-MNIST (Xiao, Rasul & Vollgraf
// 2017; 60,000 training and 10,000 test images of clothing, 28x28 grey, 10 classes) with Ravel's
// autograd, its nn modules and Adam. Prints progress, the test accuracy after every epoch and a
// confusion matrix, and writes the loss and accuracy curves as SVG files.
//   fashion_mnist [--epochs N] [--batch N] [--lr X] [--channels C1,C2] [--seed N] [--steps N]
//                 [--data DIR] [--out DIR] [--dtype f32|bf16|f16]
// --dtype bf16/f16 trains in mixed precision (docs/nn.md): f32 master weights, the convolutions
// and the head in the half dtype under nn::Autocast (batch norm and the loss in f32), and for f16
// dynamic loss scaling (nn::GradScaler); the test set is evaluated under the same autocast.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <optional>
#include <random>
#include <string>

#include "../common/svg.hpp"
#include "idx.hpp"
#include "model.hpp"
#include "ravel/ravel.hpp"

using ravel::Tensor;
using namespace fashion_mnist;

namespace {

struct Options {
  int64_t epochs = 6, batch = 128, c1 = 16, c2 = 32, steps = 0;  // steps 0: whole epochs
  double lr = 3e-3;
  uint64_t seed = 42;
  std::string data = "/usr/share/datasets/fashion-mnist", out = ".";
  std::optional<ravel::DType> half;  // --dtype bf16|f16: the layers' compute dtype (f32: none)
};

[[noreturn]] void usage(int code) {
  std::puts(
      "usage: fashion_mnist [--epochs N] [--batch N] [--lr X] [--channels C1,C2] [--seed N] [--steps N]\n"
      "                     [--data DIR] [--out DIR] [--dtype f32|bf16|f16]\n"
      "Trains a small CNN (two conv + batch norm + max-pool blocks, a linear head) on Fashion-MNIST\n"
      "with Adam and reports the test accuracy and a confusion matrix.\n"
      "  --steps N   stop after N training steps (0: run every epoch)\n"
      "  --data DIR  the IDX files (train-images-idx3-ubyte.gz, ...; package dataset-fashion-mnist)\n"
      "  --dtype     the layers' compute dtype: bf16 or f16 train in mixed precision (f32 master\n"
      "              weights; f16 with dynamic loss scaling)\n"
      "Defaults: --epochs 6 --batch 128 --lr 0.003 --channels 16,32 --seed 42 --steps 0\n"
      "          --data /usr/share/datasets/fashion-mnist --out . --dtype f32");
  std::exit(code);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") usage(0);
    if (i + 1 >= argc) { std::fprintf(stderr, "fashion_mnist: %s needs a value\n", a.c_str()); usage(2); }
    std::string v = argv[++i];
    try {
      if (a == "--epochs") o.epochs = std::stoll(v);
      else if (a == "--batch") o.batch = std::stoll(v);
      else if (a == "--lr") o.lr = std::stod(v);
      else if (a == "--seed") o.seed = std::stoull(v);
      else if (a == "--steps") o.steps = std::stoll(v);
      else if (a == "--data") o.data = v;
      else if (a == "--out") o.out = v;
      else if (a == "--dtype" && (v == "f32" || v == "bf16" || v == "f16"))
        o.half = v == "f32" ? std::nullopt : std::optional<ravel::DType>(v == "bf16" ? ravel::DType::BF16 : ravel::DType::F16);
      else if (a == "--dtype") {
        std::fprintf(stderr, "fashion_mnist: bad value '%s' for --dtype (expected f32, bf16 or f16)\n", v.c_str());
        usage(2);
      }
      else if (a == "--channels") {
        const size_t comma = v.find(',');
        if (comma == std::string::npos) throw std::invalid_argument(v);
        o.c1 = std::stoll(v.substr(0, comma));
        o.c2 = std::stoll(v.substr(comma + 1));
      } else { std::fprintf(stderr, "fashion_mnist: unknown option %s\n", a.c_str()); usage(2); }
    } catch (const std::logic_error&) {
      std::fprintf(stderr, "fashion_mnist: bad value '%s' for %s\n", v.c_str(), a.c_str());
      usage(2);
    }
  }
  if (o.epochs < 1 || o.batch < 2 || o.c1 < 1 || o.c2 < 1 || o.steps < 0 || !(o.lr > 0)) {
    std::fprintf(stderr, "fashion_mnist: epochs, channels and the learning rate must be positive, the batch at least 2\n");
    usage(2);
  }
  return o;
}

// Pixels scaled to [0, 1] and standardised by the training set's mean and standard deviation.
struct Normalised {
  std::vector<float> pixels;
  int64_t count, rows, cols;
};
Normalised normalise(const Images& im, double mean, double sd) {
  Normalised n{std::vector<float>(im.pixels.size()), im.count, im.rows, im.cols};
  for (size_t i = 0; i < im.pixels.size(); ++i) n.pixels[i] = static_cast<float>((im.pixels[i] / 255.0 - mean) / sd);
  return n;
}

// Rows `order[first..first+n)` of the set as a [n, 1, rows, cols] batch and their labels.
std::pair<Tensor, Tensor> batch_of(const Normalised& x, const std::vector<uint8_t>& y, const std::vector<int64_t>& order,
                                   int64_t first, int64_t n) {
  const int64_t px = x.rows * x.cols;
  std::vector<float> pix(static_cast<size_t>(n * px));
  std::vector<int64_t> lab(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; ++b) {
    const int64_t i = order[first + b];
    std::copy_n(x.pixels.begin() + i * px, px, pix.begin() + b * px);
    lab[b] = y[i];
  }
  return {Tensor::from_vector(pix, {n, 1, x.rows, x.cols}), Tensor::from_vector(lab, {n})};
}

struct Evaluation {
  double loss = 0, accuracy = 0;
  std::vector<int64_t> confusion;  // [true class][predicted class]
};

// The layers' compute dtype for the rest of the scope: none for f32 (docs/nn.md, Mixed precision).
ravel::nn::Autocast autocast_for(const Options& o) {
  return ravel::nn::Autocast(o.half.value_or(ravel::DType::BF16), o.half.has_value());
}

Evaluation evaluate(Model& model, const Normalised& x, const std::vector<uint8_t>& y, const Options& o) {
  ravel::NoGradGuard no_grad;
  const ravel::nn::Autocast autocast = autocast_for(o);
  model.eval();
  Evaluation e;
  e.confusion.assign(kClasses * kClasses, 0);
  std::vector<int64_t> order(x.count);
  std::iota(order.begin(), order.end(), 0);
  const int64_t chunk = 500;
  int64_t correct = 0;
  for (int64_t s = 0; s < x.count; s += chunk) {
    const int64_t n = std::min(chunk, x.count - s);
    auto [images, labels] = batch_of(x, y, order, s, n);
    Tensor logits = model(images);
    Tensor loss = ravel::nn::cross_entropy(logits, labels, ravel::nn::Reduction::Sum);
    Tensor predicted = logits.argmax(1);
    ravel::realize({loss, predicted});
    e.loss += loss.item<double>();
    const auto p = predicted.to_vector<int64_t>();
    for (int64_t b = 0; b < n; ++b) {
      e.confusion[y[s + b] * kClasses + p[b]] += 1;
      correct += p[b] == y[s + b];
    }
  }
  model.train();
  e.loss /= static_cast<double>(x.count);
  e.accuracy = static_cast<double>(correct) / static_cast<double>(x.count);
  return e;
}

void print_confusion(const std::vector<int64_t>& c) {
  std::printf("\nconfusion matrix (rows: true class, columns: predicted; %% of the row on the diagonal)\n%13s", "");
  for (int j = 0; j < kClasses; ++j) std::printf("%6d", j);
  std::printf("\n");
  for (int i = 0; i < kClasses; ++i) {
    int64_t row = 0;
    for (int j = 0; j < kClasses; ++j) row += c[i * kClasses + j];
    std::printf("%d %-11s", i, kClassNames[i]);
    for (int j = 0; j < kClasses; ++j) std::printf("%6lld", static_cast<long long>(c[i * kClasses + j]));
    std::printf("   %5.1f%%\n", row ? 100.0 * c[i * kClasses + i] / row : 0.0);
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  const auto t_load = std::chrono::steady_clock::now();
  Split train = load_split(o.data, "train", kClasses), test = load_split(o.data, "t10k", kClasses);
  if (test.images.rows != train.images.rows || test.images.cols != train.images.cols)
    throw IdxError("the test images are " + std::to_string(test.images.rows) + "x" + std::to_string(test.images.cols) +
                   ", the training images " + std::to_string(train.images.rows) + "x" + std::to_string(train.images.cols));
  if (train.images.rows % 4 != 0 || train.images.cols % 4 != 0)
    throw IdxError("the images are " + std::to_string(train.images.rows) + "x" + std::to_string(train.images.cols) +
                   "; the model's two 2x2 poolings expect sizes divisible by 4");
  double mean = 0, sq = 0;
  for (uint8_t p : train.images.pixels) mean += p / 255.0, sq += (p / 255.0) * (p / 255.0);
  mean /= static_cast<double>(train.images.pixels.size());
  const double sd = std::sqrt(std::max(1e-12, sq / static_cast<double>(train.images.pixels.size()) - mean * mean));
  const Normalised xtrain = normalise(train.images, mean, sd), xtest = normalise(test.images, mean, sd);
  const double load_secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();

  Model model(o.c1, o.c2, train.images.rows, train.images.cols, o.seed);
  const int64_t steps_per_epoch = (xtrain.count + o.batch - 1) / o.batch;
  const int64_t total = o.steps > 0 ? std::min(o.steps, o.epochs * steps_per_epoch) : o.epochs * steps_per_epoch;
  std::printf("fashion_mnist on %s: %lld training and %lld test images of %lldx%lld from %s (read in %.1f s)\n",
              ravel::Runtime::get().default_device().str().c_str(), static_cast<long long>(xtrain.count),
              static_cast<long long>(xtest.count), static_cast<long long>(xtrain.rows),
              static_cast<long long>(xtrain.cols), o.data.c_str(), load_secs);
  std::printf("model: %s (%lld parameters)\n", model.describe().c_str(), static_cast<long long>(model.parameter_count()));
  std::printf("training %lld steps (%lld epochs of %lld), batch %lld, Adam lr %.3g (cosine decay to 0)%s\n\n",
              static_cast<long long>(total), static_cast<long long>(o.epochs), static_cast<long long>(steps_per_epoch),
              static_cast<long long>(o.batch), o.lr,
              !o.half ? ""
              : *o.half == ravel::DType::BF16 ? "; mixed precision: bf16 layers, f32 weights"
                                              : "; mixed precision: f16 layers, f32 weights, dynamic loss scaling");

  ravel::nn::Adam adam(model.parameters(), o.lr);
  // Dynamic loss scaling for f16 only (bf16 has f32's exponent range), as torch.amp.GradScaler(
  // enabled=dtype == float16); disabled, scale() is the loss and step() is adam.step().
  ravel::nn::GradScaler::Options scaling;
  scaling.enabled = o.half == ravel::DType::F16;
  ravel::nn::GradScaler scaler(scaling);
  std::mt19937_64 rng(o.seed);
  std::vector<int64_t> order(xtrain.count);
  std::iota(order.begin(), order.end(), 0);
  chart::Series loss_curve{"train loss (batches, smoothed)", "#1f77b4", {}}, test_loss{"test loss", "#d62728", {}};
  chart::Series acc_curve{"train accuracy (batches, smoothed)", "#1f77b4", {}}, test_acc{"test accuracy", "#d62728", {}};
  const bool tty = isatty(STDOUT_FILENO);
  const int64_t log_every = std::max<int64_t>(1, steps_per_epoch / 4);
  double smooth_loss = 0, smooth_acc = 0;
  Evaluation last;
  ravel::reset_stats();
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  double eval_secs = 0;
  int64_t step = 0;
  for (int64_t epoch = 1; epoch <= o.epochs && step < total; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t first = 0; first < xtrain.count && step < total; first += o.batch) {
      ++step;
      const int64_t n = std::min(o.batch, xtrain.count - first);
      if (n < 2) continue;  // batch norm needs two values per channel
      auto [images, labels] = batch_of(xtrain, train.labels, order, first, n);
      // Cosine decay over the whole run (Loshchilov & Hutter 2017): fast early, settled at the end.
      adam.lr = o.lr * 0.5 * (1 + std::cos(M_PI * static_cast<double>(step - 1) / static_cast<double>(total)));
      Tensor logits, loss;
      {
        const ravel::nn::Autocast autocast = autocast_for(o);  // --dtype
        logits = model(images);
        loss = ravel::nn::cross_entropy(logits, labels);  // f32 under autocast
      }
      Tensor correct = logits.detach().argmax(1).eq(labels).sum();
      // The accuracy and the batch-norm running statistics in the gradients' pass: realized
      // later, they would run the forward pass again (Note [Lazy running statistics]).
      std::vector<Tensor> also{correct};
      for (Tensor* b : model.buffers()) also.push_back(*b);
      adam.zero_grad();
      scaler.scale(loss).backward({}, also);
      scaler.step(adam);
      scaler.update();
      adam.zero_grad();
      const double l = loss.item<double>(), acc = correct.item<double>() / static_cast<double>(n);
      smooth_loss = step == 1 ? l : 0.98 * smooth_loss + 0.02 * l;
      smooth_acc = step == 1 ? acc : 0.98 * smooth_acc + 0.02 * acc;
      if (step % std::max<int64_t>(1, total / 300) == 0 || step == 1) {
        loss_curve.points.emplace_back(step, smooth_loss);
        acc_curve.points.emplace_back(step, 100 * smooth_acc);
      }
      if (step % log_every == 0 || step == total || (tty && step % 10 == 0)) {
        const int filled = static_cast<int>(30.0 * step / total);
        std::printf("%sepoch %lld step %6lld/%lld [%s%s] loss %.4f acc %5.1f%% | %.1f steps/s%s", tty ? "\r" : "",
                    static_cast<long long>(epoch), static_cast<long long>(step), static_cast<long long>(total),
                    std::string(filled, '#').c_str(), std::string(30 - filled, '.').c_str(), smooth_loss,
                    100 * smooth_acc, step / (elapsed() - eval_secs), tty ? "" : "\n");
        std::fflush(stdout);
      }
    }
    const double t0 = elapsed();
    last = evaluate(model, xtest, test.labels, o);
    eval_secs += elapsed() - t0;
    test_loss.points.emplace_back(step, last.loss);
    test_acc.points.emplace_back(step, 100 * last.accuracy);
    std::printf("%sepoch %lld: test loss %.4f, test accuracy %.2f%% (%.0f s so far, %.1f s of it evaluating)\n",
                tty ? "\n" : "", static_cast<long long>(epoch), last.loss, 100 * last.accuracy, elapsed(), eval_secs);
  }
  const double secs = elapsed();
  std::printf("\ntrained %lld steps in %.1f s (%.1f steps/s, %.0f images/s); evaluation %.1f s\n",
              static_cast<long long>(step), secs - eval_secs, step / (secs - eval_secs),
              step * o.batch / (secs - eval_secs), eval_secs);
  const ravel::KernelStats st = ravel::cumulative_stats();
  std::printf("per step (evaluation included): %.1f kernels (%.1f contractions), %.1f ms scheduling, %.1f ms in kernels\n",
              double(st.kernels()) / step, double(st.contractions) / step, st.schedule_seconds / step * 1e3,
              st.execute_seconds / step * 1e3);
  std::printf("test accuracy: %.2f%% (%lld of %lld)\n", 100 * last.accuracy,
              static_cast<long long>(std::llround(last.accuracy * xtest.count)), static_cast<long long>(xtest.count));
  if (scaler.is_enabled())
    std::printf("loss scale at the end: %g (%lld good steps since its last change)\n", scaler.get_scale(),
                static_cast<long long>(scaler.growth_tracker()));
  print_confusion(last.confusion);

  std::filesystem::create_directories(o.out);
  const auto out = std::filesystem::path(o.out);
  const std::string loss_svg = (out / "fashion-mnist-loss.svg").string(), acc_svg = (out / "fashion-mnist-accuracy.svg").string();
  chart::write_line_chart(loss_svg, "Fashion-MNIST CNN: loss", "step", "cross-entropy (nats)", {loss_curve, test_loss});
  chart::write_line_chart(acc_svg, "Fashion-MNIST CNN: accuracy", "step", "accuracy (%)", {acc_curve, test_acc});
  std::printf("\ncurves written to %s and %s\n", std::filesystem::absolute(loss_svg).string().c_str(),
              std::filesystem::absolute(acc_svg).string().c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
  return 1;
}
