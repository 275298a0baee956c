// attn-cli diff: two dumps compared in forward order (workloads/dump_diff.hpp), printed as a
// table whose last line names the first tensor past the tolerance, or as one JSON object.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "attn/io/text.hpp"
#include "commands/commands.hpp"
#include "workloads/dump_diff.hpp"

namespace cli {

namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// "ok", "values", "shape", "only A", "only B".
std::string status(const TensorDiff& t) {
  if (!t.in_b) return "only A";
  if (!t.in_a) return "only B";
  if (!t.same_shape()) return "shape";
  return t.over ? "values" : "ok";
}

std::string tolerance_text(const DumpDiff& d) {
  return "rtol " + number(d.tolerance.rtol) + ", atol " + number(d.tolerance.atol);
}

// The last line: where the dumps part, or that they do not.
std::string verdict(const DumpDiff& d) {
  if (!d.first.empty()) {
    for (const TensorDiff& t : d.tensors) {
      if (t.name != d.first) continue;
      const std::string name = attn::escape(t.name);
      if (!t.same_shape())
        return "first difference: " + name + ": shape " + shape_text(t.shape_a) + " in A, " +
               shape_text(t.shape_b) + " in B";
      return "first difference: " + name + ": " + std::to_string(t.over) + " of " +
             std::to_string(t.numel) + " values past " + tolerance_text(d) + " (max abs error " +
             number(t.max_abs) + ", max relative " + number(t.max_rel) + ")";
    }
  }
  std::int64_t only = 0, n = 0;
  for (const TensorDiff& t : d.tensors) only += !t.in_a || !t.in_b, ++n;
  if (only)
    return "the tensors in both agree within " + tolerance_text(d) + "; " + std::to_string(only) +
           " name(s) in one file only";
  return "equal: " + std::to_string(n) + " tensors within " + tolerance_text(d);
}

void print_text(std::ostream& out, const DumpDiff& d) {
  std::size_t width = 6;
  for (const TensorDiff& t : d.tensors) width = std::max(width, attn::escape(t.name).size());
  width = std::min<std::size_t>(width, 60);
  char line[512];
  std::snprintf(line, sizeof line, "%-*s  %-7s %-20s %10s %10s %s\n", int(width), "tensor",
                "status", "shape", "max_abs", "max_rel", "over");
  out << "A: " << attn::escape(d.a) << "\nB: " << attn::escape(d.b) << "\n" << line;
  for (const TensorDiff& t : d.tensors) {
    std::string shape = shape_text(t.in_a ? t.shape_a : t.shape_b);
    if (t.in_a && t.in_b && !t.same_shape())
      shape = shape_text(t.shape_a) + " vs " + shape_text(t.shape_b);
    const bool compared = t.same_shape();
    std::snprintf(
        line, sizeof line, "%-*s  %-7s %-20s %10s %10s %s\n", int(width),
        attn::escape(t.name).c_str(), status(t).c_str(), shape.c_str(),
        compared ? number(t.max_abs).c_str() : "-", compared ? number(t.max_rel).c_str() : "-",
        compared ? (std::to_string(t.over) + "/" + std::to_string(t.numel)).c_str() : "-");
    out << line;
  }
  out << verdict(d) << "\n";
}

void print_json(std::ostream& out, const DumpDiff& d) {
  nlohmann::json tensors = nlohmann::json::array(), only_a = nlohmann::json::array(),
                 only_b = nlohmann::json::array();
  for (const TensorDiff& t : d.tensors) {
    if (!t.in_b) only_a.push_back(t.name);
    if (!t.in_a) only_b.push_back(t.name);
    nlohmann::json row = {{"name", t.name}, {"status", status(t)}};
    if (t.in_a) row["dtype_a"] = t.dtype_a, row["shape_a"] = t.shape_a;
    if (t.in_b) row["dtype_b"] = t.dtype_b, row["shape_b"] = t.shape_b;
    if (t.same_shape())
      row.update({{"numel", t.numel},
                  {"over", t.over},
                  {"nonfinite", t.nonfinite},
                  {"max_abs", t.max_abs},
                  {"max_rel", t.max_rel}});
    tensors.push_back(std::move(row));
  }
  const nlohmann::json j = {{"a", d.a},
                            {"b", d.b},
                            {"rtol", d.tolerance.rtol},
                            {"atol", d.tolerance.atol},
                            {"equal", d.equal()},
                            {"first", d.first.empty() ? nlohmann::json() : nlohmann::json(d.first)},
                            {"only_in_a", only_a},
                            {"only_in_b", only_b},
                            {"tensors", tensors}};
  out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace

int diff_command(const Options& f) {
  const DumpDiff d = diff_dumps(f.diff_a, f.diff_b, {f.rtol, f.atol});
  if (f.json)
    print_json(std::cout, d);
  else
    print_text(std::cout, d);
  std::cout.flush();
  if (!std::cout) throw std::runtime_error("could not write to stdout");
  return d.equal() ? 0 : 1;
}

}  // namespace cli
