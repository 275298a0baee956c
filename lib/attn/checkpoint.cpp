#include "attn/checkpoint.hpp"

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/text.hpp"

namespace attn {

namespace {

using nlohmann::json;

// An index names shard files beside it; a name with a directory part could reach anywhere.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

// Hub indexes are tens of KiB; 64 MiB is far past any.
constexpr std::uint64_t kMaxIndexBytes = 64 << 20;

json read_index(const std::filesystem::path& path) {
  const std::string text = read_small_file(path, "safetensors index", kMaxIndexBytes);
  try {
    return json::parse(text);
  } catch (const json::exception&) {
    throw InputError(escape(path.string()) + ": the safetensors index is not valid JSON");
  }
}

Checkpoint open_index(const std::filesystem::path& path) {
  const json j = read_index(path);
  const std::string src = escape(path.string());
  if (!j.is_object() || !j.contains("weight_map") || !j.at("weight_map").is_object())
    throw InputError(src + ": key 'weight_map': expected an object of tensor name -> file name");
  Checkpoint c;
  c.path = src;
  c.dir = path.parent_path();
  for (auto& [name, file] : j.at("weight_map").items()) {
    if (!file.is_string() || !plain_file_name(file.get<std::string>()))
      throw InputError(src + ": key 'weight_map': tensor " + attn::quoted(name) +
                       " must name a file in the index's directory");
    c.weight_map[name] = file.get<std::string>();
  }
  return c;
}

}  // namespace

const SafetensorsFile& Checkpoint::file_of(const std::string& name) {
  auto it = weight_map.find(name);
  if (it == weight_map.end())
    throw InputError(path + ": tensor " + attn::quoted(name) + " is missing");
  auto& file = files[it->second];
  if (!file) {
    file = std::make_unique<SafetensorsFile>(open_safetensors(dir / it->second));
    // The index and the shard must agree, or a tensor would be read from the wrong place.
    if (!file->header.tensors.count(name))
      throw InputError(path + ": tensor " + attn::quoted(name) + " is listed in file " +
                       attn::quoted(it->second) + ", which does not hold it");
  }
  return *file;
}

Checkpoint open_checkpoint(const std::filesystem::path& path) {
  if (path.string().ends_with(".index.json")) return open_index(path);
  Checkpoint c;
  c.path = escape(path.string());
  c.dir = path.parent_path();
  const std::string file = path.filename().string();
  auto& mapped = c.files[file];
  mapped = std::make_unique<SafetensorsFile>(open_safetensors(path));
  for (auto& [name, info] : mapped->header.tensors) c.weight_map[name] = file;
  return c;
}

}  // namespace attn
