// argnums (JAX's): grad, value_and_grad, jacfwd, jacrev and hessian of functions of several
// tensors, with respect to chosen arguments. Every expectation is independent of the code under
// test: closed-form derivatives of f(x, y) = sum(x*x*y) + sum(sin y) and of its elementwise
// form, and central finite differences (first and second order) of a generic three-argument
// function, computed here on the host from plain forward evaluations.
#include "gradcheck.hpp"

#include <string>

using namespace adtest;
using ravel::GradFn;
using ravel::HessianFn;

namespace {

// x is [rows, 3] or [3] (rows = 1), y is [3] and broadcasts against x's last axis, so the
// blocks below cover both equal shapes (the f) and different ones.
//   f(x, y) = sum_ab x_ab^2 y_b + sum_b sin y_b
//   df/dx_ab = 2 x_ab y_b                    df/dy_b = sum_a x_ab^2 + cos y_b
//   d2f/dx_ab dx_a'b' = 2 y_b [a=a'][b=b']   d2f/dx_ab dy_c = 2 x_ab [b=c]
//   d2f/dy_b dx_ac = 2 x_ac [b=c]            d2f/dy_b dy_c = -sin y_b [b=c]
Tensor f_scalar(const std::vector<Tensor>& a) { return (a[0] * a[0] * a[1]).sum() + a[1].sin().sum(); }
// g(x, y) = x*x*y + sin(y), shaped like x: dg_ab/dx_a'b' = 2 x_ab y_b [a=a'][b=b'],
// dg_ab/dy_c = (x_ab^2 + cos y_b) [b=c].
Tensor g_tensor(const std::vector<Tensor>& a) { return a[0] * a[0] * a[1] + a[1].sin(); }

struct Case {
  Shape xs;
  int64_t rows;
  std::vector<double> x, y;
};
std::vector<Case> cases() {
  return {{{3}, 1, values(normal({3}, 3)), values(normal({3}, 4))},
          {{2, 3}, 2, values(normal({2, 3}, 5)), values(normal({3}, 6))}};
}
constexpr int64_t C = 3;  // y's length

std::string label(const Case& c) { return "x " + shape_text(c.xs) + ", y [3]"; }

BOOST_AUTO_TEST_CASE(grad_and_value_and_grad_blocks) {
  for (const Case& c : cases()) {
    BOOST_TEST_CONTEXT(label(c)) {
      Tensor x = host(c.x, c.xs), y = host(c.y, {C});
      std::vector<double> gx(c.x.size()), gy(C), value = {0.0};
      for (int64_t b = 0; b < C; ++b) gy[b] = std::cos(c.y[b]), value[0] += std::sin(c.y[b]);
      for (int64_t a = 0; a < c.rows; ++a)
        for (int64_t b = 0; b < C; ++b) {
          const double xv = c.x[a * C + b];
          gx[a * C + b] = 2 * xv * c.y[b];
          gy[b] += xv * xv;
          value[0] += xv * xv * c.y[b];
        }
      check_values("grad(f, 0)", ravel::grad(f_scalar, 0)({x, y}), c.xs, gx, 1e-12, 1e-12);
      check_values("grad(f, 1)", ravel::grad(f_scalar, 1)({x, y}), {C}, gy, 1e-12, 1e-12);
      check_values("grad(f, -1)", ravel::grad(f_scalar, -1)({x, y}), {C}, gy, 1e-12, 1e-12);
      check_values("grad(f, -2)", ravel::grad(f_scalar, -2)({x, y}), c.xs, gx, 1e-12, 1e-12);
      // A list gives one gradient per listed argument, in the list's order.
      std::vector<Tensor> g10 = ravel::grad(f_scalar, {1, 0})({x, y});
      BOOST_REQUIRE_EQUAL(g10.size(), 2u);
      check_values("grad(f, {1, 0})[0]", g10[0], {C}, gy, 1e-12, 1e-12);
      check_values("grad(f, {1, 0})[1]", g10[1], c.xs, gx, 1e-12, 1e-12);
      // A one-element braced list is still a list (the initializer_list overload wins over int).
      std::vector<Tensor> g1 = ravel::grad(f_scalar, {1})({x, y});
      BOOST_REQUIRE_EQUAL(g1.size(), 1u);
      check_values("grad(f, {1})[0]", g1[0], {C}, gy, 1e-12, 1e-12);
      std::vector<Tensor> gv = ravel::grad(f_scalar, std::vector<int64_t>{0, -1})({x, y});
      BOOST_REQUIRE_EQUAL(gv.size(), 2u);
      check_values("grad(f, vector{0, -1})[1]", gv[1], {C}, gy, 1e-12, 1e-12);

      auto [v1, d1] = ravel::value_and_grad(f_scalar, {x, y}, 1);
      check_values("value_and_grad(f, xs, 1).first", v1, {}, value, 1e-12, 1e-12);
      check_values("value_and_grad(f, xs, 1).second", d1, {C}, gy, 1e-12, 1e-12);
      auto [v2, d2] = ravel::value_and_grad(f_scalar, {x, y}, {0, 1});
      BOOST_REQUIRE_EQUAL(d2.size(), 2u);
      check_values("value_and_grad(f, xs, {0, 1}).first", v2, {}, value, 1e-12, 1e-12);
      check_values("value_and_grad(f, xs, {0, 1}).second[0]", d2[0], c.xs, gx, 1e-12, 1e-12);
      check_values("value_and_grad(f, xs, {0, 1}).second[1]", d2[1], {C}, gy, 1e-12, 1e-12);
    }
  }
}

BOOST_AUTO_TEST_CASE(jacobian_blocks_of_a_tensor_output) {
  for (const Case& c : cases()) {
    BOOST_TEST_CONTEXT(label(c)) {
      Tensor x = host(c.x, c.xs), y = host(c.y, {C});
      const int64_t n = c.rows * C;
      Shape jx_shape = c.xs, jy_shape = c.xs;
      jx_shape.insert(jx_shape.end(), c.xs.begin(), c.xs.end());
      jy_shape.push_back(C);
      std::vector<double> jx(n * n, 0.0), jy(n * C, 0.0);
      for (int64_t a = 0; a < c.rows; ++a)
        for (int64_t b = 0; b < C; ++b) {
          const int64_t i = a * C + b;
          const double xv = c.x[i];
          jx[i * n + i] = 2 * xv * c.y[b];
          jy[i * C + b] = xv * xv + std::cos(c.y[b]);
        }
      check_values("jacrev(g, 0)", ravel::jacrev(g_tensor, 0)({x, y}), jx_shape, jx, 1e-12, 1e-12);
      check_values("jacfwd(g, 0)", ravel::jacfwd(g_tensor, 0)({x, y}), jx_shape, jx, 1e-12, 1e-12);
      check_values("jacrev(g, 1)", ravel::jacrev(g_tensor, 1)({x, y}), jy_shape, jy, 1e-12, 1e-12);
      check_values("jacfwd(g, -1)", ravel::jacfwd(g_tensor, -1)({x, y}), jy_shape, jy, 1e-12, 1e-12);
      for (const auto& [name, jac] : std::vector<std::pair<std::string, GradFn>>{
               {"jacrev", ravel::jacrev(g_tensor, {1, 0})}, {"jacfwd", ravel::jacfwd(g_tensor, {1, 0})}}) {
        std::vector<Tensor> blocks = jac({x, y});
        BOOST_REQUIRE_EQUAL(blocks.size(), 2u);
        check_values(name + "(g, {1, 0})[0]", blocks[0], jy_shape, jy, 1e-12, 1e-12);
        check_values(name + "(g, {1, 0})[1]", blocks[1], jx_shape, jx, 1e-12, 1e-12);
      }
      // A one-element output (0-d) gives blocks shaped like the argument: the gradient.
      std::vector<double> gx(n);
      for (int64_t i = 0; i < n; ++i) gx[i] = 2 * c.x[i] * c.y[i % C];
      check_values("jacrev(f, 0)", ravel::jacrev(f_scalar, 0)({x, y}), c.xs, gx, 1e-12, 1e-12);
      check_values("jacfwd(f, 0)", ravel::jacfwd(f_scalar, 0)({x, y}), c.xs, gx, 1e-12, 1e-12);
    }
  }
}

BOOST_AUTO_TEST_CASE(hessian_blocks_including_the_mixed_ones) {
  for (const Case& c : cases()) {
    BOOST_TEST_CONTEXT(label(c)) {
      Tensor x = host(c.x, c.xs), y = host(c.y, {C});
      const int64_t n = c.rows * C;
      Shape xx = c.xs, xy = c.xs, yx = {C}, yy = {C, C};
      xx.insert(xx.end(), c.xs.begin(), c.xs.end());
      xy.push_back(C);
      yx.insert(yx.end(), c.xs.begin(), c.xs.end());
      std::vector<double> hxx(n * n, 0.0), hxy(n * C, 0.0), hyx(C * n, 0.0), hyy(C * C, 0.0);
      for (int64_t b = 0; b < C; ++b) hyy[b * C + b] = -std::sin(c.y[b]);
      for (int64_t a = 0; a < c.rows; ++a)
        for (int64_t b = 0; b < C; ++b) {
          const int64_t i = a * C + b;
          hxx[i * n + i] = 2 * c.y[b];
          hxy[i * C + b] = 2 * c.x[i];
          hyx[b * n + i] = 2 * c.x[i];
        }
      std::vector<std::vector<Tensor>> h = ravel::hessian(f_scalar, {0, 1})({x, y});
      BOOST_REQUIRE_EQUAL(h.size(), 2u);
      BOOST_REQUIRE_EQUAL(h[0].size(), 2u);
      BOOST_REQUIRE_EQUAL(h[1].size(), 2u);
      check_values("hessian(f, {0, 1})[0][0] = d2f/dx dx", h[0][0], xx, hxx, 1e-12, 1e-12);
      check_values("hessian(f, {0, 1})[0][1] = d2f/dx dy", h[0][1], xy, hxy, 1e-12, 1e-12);
      check_values("hessian(f, {0, 1})[1][0] = d2f/dy dx", h[1][0], yx, hyx, 1e-12, 1e-12);
      check_values("hessian(f, {0, 1})[1][1] = d2f/dy dy", h[1][1], yy, hyy, 1e-12, 1e-12);
      // The order of the list is the order of the blocks.
      std::vector<std::vector<Tensor>> r = ravel::hessian(f_scalar, {-1, 0})({x, y});
      BOOST_REQUIRE(r.size() == 2u && r[0].size() == 2u);
      check_values("hessian(f, {-1, 0})[0][1] = d2f/dy dx", r[0][1], yx, hyx, 1e-12, 1e-12);
      check_values("hessian(f, {-1, 0})[1][0] = d2f/dx dy", r[1][0], xy, hxy, 1e-12, 1e-12);
      // One index: the diagonal block alone.
      check_values("hessian(f, 0)", ravel::hessian(f_scalar, 0)({x, y}), xx, hxx, 1e-12, 1e-12);
      check_values("hessian(f, 1)", ravel::hessian(f_scalar, 1)({x, y}), yy, hyy, 1e-12, 1e-12);
      // A tensor output: d2g_ab/dy_c dy_d = -sin(y_b) [b=c][b=d], shaped x + y + y.
      Shape gyy = c.xs;
      gyy.insert(gyy.end(), {C, C});
      std::vector<double> hg(n * C * C, 0.0);
      for (int64_t i = 0; i < n; ++i) hg[i * C * C + (i % C) * C + i % C] = -std::sin(c.y[i % C]);
      check_values("hessian(g, 1)", ravel::hessian(g_tensor, 1)({x, y}), gyy, hg, 1e-12, 1e-12);
      // The single-index forms compose into the mixed blocks, in both modes.
      check_values("jacfwd(grad(f, 0), 1)", ravel::jacfwd(ravel::grad(f_scalar, 0), 1)({x, y}), xy, hxy, 1e-12, 1e-12);
      check_values("jacrev(grad(f, 1), 0)", ravel::jacrev(ravel::grad(f_scalar, 1), 0)({x, y}), yx, hyx, 1e-12, 1e-12);
      check_values("jacrev(jacrev(f, 0), 1)", ravel::jacrev(ravel::jacrev(f_scalar, 0), 1)({x, y}), xy, hxy, 1e-12,
                   1e-12);
      // grad of a scalar built from grad: d/dy sum_ab 2 x_ab y_b = sum_a 2 x_ab.
      std::vector<double> colsum(C, 0.0);
      for (int64_t i = 0; i < n; ++i) colsum[i % C] += 2 * c.x[i];
      TensorFn sum_gx = [](const std::vector<Tensor>& a) { return ravel::grad(f_scalar, 0)(a).sum(); };
      check_values("grad(sum grad(f, 0), 1)", ravel::grad(sum_gx, 1)({x, y}), {C}, colsum, 1e-12, 1e-12);
    }
  }
}

// h(a, b, c) = tanh(a @ b) * c + a[:, :2] * c (output [2, 2]) and s = sum(h * h), against
// central differences: first order for the Jacobian blocks, second order for the Hessian blocks,
//   d2s/du dv ~ (s(+u,+v) - s(+u,-v) - s(-u,+v) + s(-u,-v)) / (4 e^2)
// with e = 1e-4: truncation ~ e^2 s'''' ~ 1e-8 and rounding ~ 1e-16 |s| / e^2 ~ 1e-8, so 1e-5
// separates them from any wrong block (O(1) off).
Tensor h_fn(const std::vector<Tensor>& v) {
  return (v[0].matmul(v[1])).tanh() * v[2] + v[0].shrink({{0, 2}, {0, 2}}) * v[2];
}
Tensor s_fn(const std::vector<Tensor>& v) {
  Tensor h = h_fn(v);
  return (h * h).sum();
}

BOOST_AUTO_TEST_CASE(three_arguments_against_finite_differences) {
  const std::vector<Shape> shapes = {{2, 3}, {3, 2}, {2}};
  std::vector<std::vector<double>> hx = {values(normal(shapes[0], 11)), values(normal(shapes[1], 12)),
                                         values(normal(shapes[2], 13))};
  std::vector<Tensor> xs;
  for (size_t i = 0; i < 3; ++i) xs.push_back(host(hx[i], shapes[i]));

  // Jacobian block of h with respect to argument i: [2, 2] + shapes[i], element-major.
  auto fd_jacobian = [&](size_t i) {
    const size_t m = 4, n = hx[i].size();
    std::vector<double> out(m * n);
    for (size_t k = 0; k < n; ++k) {
      auto p = hx, q = hx;
      p[i][k] += kEps, q[i][k] -= kEps;
      std::vector<double> fp = evaluate(h_fn, p, shapes), fm = evaluate(h_fn, q, shapes);
      for (size_t r = 0; r < m; ++r) out[r * n + k] = (fp[r] - fm[r]) / (2 * kEps);
    }
    return out;
  };
  auto block_shape = [&](const Shape& out, size_t i) {
    Shape s = out;
    s.insert(s.end(), shapes[i].begin(), shapes[i].end());
    return s;
  };
  const std::vector<double> j0 = fd_jacobian(0), j2 = fd_jacobian(2);
  for (const auto& [name, jac] : std::vector<std::pair<std::string, GradFn>>{
           {"jacrev", ravel::jacrev(h_fn, {2, 0})}, {"jacfwd", ravel::jacfwd(h_fn, {-1, -3})}}) {
    std::vector<Tensor> b = jac(xs);
    BOOST_REQUIRE_EQUAL(b.size(), 2u);
    check_values(name + " block of c", b[0], block_shape({2, 2}, 2), j2);
    check_values(name + " block of a", b[1], block_shape({2, 2}, 0), j0);
  }
  check_values("jacrev(h, 1)", ravel::jacrev(h_fn, 1)(xs), block_shape({2, 2}, 1), fd_jacobian(1));
  check_values("jacfwd(h, -2)", ravel::jacfwd(h_fn, -2)(xs), block_shape({2, 2}, 1), fd_jacobian(1));

  // Hessian blocks of s with respect to (c, a), i.e. hessian(s, {2, 0}).
  const double e = 1e-4;
  auto fd_hessian = [&](size_t i, size_t j) {
    const size_t ni = hx[i].size(), nj = hx[j].size();
    std::vector<double> out(ni * nj);
    for (size_t k = 0; k < ni; ++k)
      for (size_t l = 0; l < nj; ++l) {
        double acc = 0;
        for (int si : {1, -1})
          for (int sj : {1, -1}) {
            auto p = hx;
            p[i][k] += si * e;
            p[j][l] += sj * e;
            acc += si * sj * evaluate(s_fn, p, shapes)[0];
          }
        out[k * nj + l] = acc / (4 * e * e);
      }
    return out;
  };
  std::vector<std::vector<Tensor>> hs = ravel::hessian(s_fn, {2, 0})(xs);
  BOOST_REQUIRE(hs.size() == 2u && hs[0].size() == 2u && hs[1].size() == 2u);
  const std::vector<size_t> order = {2, 0};
  for (size_t p = 0; p < 2; ++p)
    for (size_t q = 0; q < 2; ++q) {
      Shape sh = block_shape({}, order[p]);
      sh.insert(sh.end(), shapes[order[q]].begin(), shapes[order[q]].end());
      check_values("hessian(s, {2, 0})[" + std::to_string(p) + "][" + std::to_string(q) + "]", hs[p][q], sh,
                   fd_hessian(order[p], order[q]), 1e-5, 1e-5);
    }
  Shape bb = shapes[1];
  bb.insert(bb.end(), shapes[1].begin(), shapes[1].end());
  check_values("hessian(s, 1)", ravel::hessian(s_fn, 1)(xs), bb, fd_hessian(1, 1), 1e-5, 1e-5);
}

// Arguments that are not differentiated are held fixed: an integer tensor may be one, and the
// same tensor passed twice is two arguments (d/da sum(a*b) at a = b = x is x, not 2x).
BOOST_AUTO_TEST_CASE(other_arguments_are_held_fixed) {
  Tensor x = host({0.5, -1.5, 2.0}, {3});
  Tensor k = Tensor::from_vector<int32_t>({3, -1, 2}, {3});
  TensorFn f = [](const std::vector<Tensor>& a) { return (a[0] * a[0] * a[1].cast(DType::F64)).sum(); };
  check_values("grad(f, 0) with an i32 argument", ravel::grad(f, 0)({x, k}), {3}, {3.0, 3.0, 8.0}, 1e-12, 1e-12);
  check_values("hessian(f, 0) with an i32 argument", ravel::hessian(f, 0)({x, k}), {3, 3},
               {6, 0, 0, 0, -2, 0, 0, 0, 4}, 1e-12, 1e-12);
  TensorFn dot = [](const std::vector<Tensor>& a) { return (a[0] * a[1]).sum(); };
  check_values("grad(dot, 0)(x, x)", ravel::grad(dot, 0)({x, x}), {3}, {0.5, -1.5, 2.0}, 1e-12, 1e-12);
  check_values("jacfwd(dot, 1)(x, x)", ravel::jacfwd(dot, 1)({x, x}), {3}, {0.5, -1.5, 2.0}, 1e-12, 1e-12);
  // d2/da db sum(a*b) = I even when a and b are the same tensor.
  check_values("hessian(dot, {0, 1})[0][1](x, x)", ravel::hessian(dot, {0, 1})({x, x})[0][1], {3, 3},
               {1, 0, 0, 0, 1, 0, 0, 0, 1}, 1e-12, 1e-12);
}

// Bad argnums throw ravel::ValueError naming the index and the number of arguments.
template <class F>
void expect_value_error(const std::string& what, F&& call, const std::vector<std::string>& needles) {
  BOOST_TEST_CONTEXT(what) {
    try {
      call();
      BOOST_ERROR("no exception");
    } catch (const ravel::ValueError& e) {
      const std::string msg = e.what();
      for (const auto& n : needles)
        BOOST_CHECK_MESSAGE(msg.find(n) != std::string::npos, "'" << msg << "' lacks '" << n << "'");
    } catch (const std::exception& e) {
      BOOST_ERROR("wrong exception type: " << e.what());
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_argnums_are_value_errors) {
  Tensor x = host({1.0, 2.0}, {2}), y = host({3.0, 4.0}, {2});
  const std::vector<Tensor> xy = {x, y};
  expect_value_error("grad(f, 2)", [&] { ravel::grad(f_scalar, 2)(xy); }, {"argnums 2", "2 arguments"});
  expect_value_error("grad(f, -3)", [&] { ravel::grad(f_scalar, -3)(xy); }, {"argnums -3", "2 arguments"});
  expect_value_error("jacrev(g, {0, 5})", [&] { ravel::jacrev(g_tensor, {0, 5})(xy); }, {"argnums 5", "2 arguments"});
  expect_value_error("jacfwd(g, 7)", [&] { ravel::jacfwd(g_tensor, 7)(xy); }, {"jacfwd", "argnums 7", "2 arguments"});
  expect_value_error("hessian(f, {-3})", [&] { ravel::hessian(f_scalar, {-3})(xy); }, {"hessian", "-3", "2 arguments"});
  expect_value_error("value_and_grad(f, xy, 2)", [&] { ravel::value_and_grad(f_scalar, xy, 2); },
                     {"value_and_grad", "argnums 2", "2 arguments"});
  expect_value_error("grad(f, 0) of no arguments", [&] { ravel::grad(f_scalar, 0)({}); }, {"argnums 0", "0 arguments"});
  // Duplicates, literally or after resolving a negative index.
  expect_value_error("grad(f, {0, 0})", [&] { ravel::grad(f_scalar, {0, 0})(xy); },
                     {"argument 0 twice", "2 arguments"});
  expect_value_error("jacrev(g, {1, -1})", [&] { ravel::jacrev(g_tensor, {1, -1})(xy); },
                     {"argument 1 twice", "1 and -1", "2 arguments"});
  expect_value_error("hessian(f, {-2, 0})", [&] { ravel::hessian(f_scalar, {-2, 0})(xy); }, {"twice", "2 arguments"});
  // An empty list is refused when the transform is built (the eager value_and_grad: when called).
  expect_value_error("grad(f, {})", [&] { ravel::grad(f_scalar, {}); }, {"empty"});
  expect_value_error("jacfwd(g, vector{})", [&] { ravel::jacfwd(g_tensor, std::vector<int64_t>{}); }, {"empty"});
  expect_value_error("jacrev(g, {})", [&] { ravel::jacrev(g_tensor, {}); }, {"empty"});
  expect_value_error("hessian(f, {})", [&] { ravel::hessian(f_scalar, {}); }, {"empty"});
  expect_value_error("value_and_grad(f, xy, {})", [&] { ravel::value_and_grad(f_scalar, xy, {}); },
                     {"empty", "2 arguments"});
  // A non-scalar output is still a ShapeError for grad, whichever argument is chosen.
  BOOST_CHECK_THROW(ravel::grad(g_tensor, 1)(xy), ravel::ShapeError);
}

}  // namespace
