#include "attn/io/checkpoint.hpp"

#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/io/detail/json_checks.hpp"
#include "attn/io/files.hpp"
#include "attn/io/text.hpp"

namespace attn {

namespace {

using nlohmann::json;

// An index names shard files beside it; a name with a directory part could reach anywhere.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

// Hub indexes are tens of KiB (DeepSeek-V3's 91,000 tensors: 8 MiB); checked as a config is,
// before parsing: a DOM value costs ~100 bytes, so 2^20 of them stay near 100 MB.
constexpr std::uint64_t kMaxIndexBytes = 16 << 20;
constexpr JsonLimits kIndexLimits{64, 1 << 20, 1 << 10};

json index_json(const std::string& text, const std::filesystem::path& path) {
  const std::string src = escape(path.string());
  if (text.size() > kMaxIndexBytes)
    throw InputError(src + ": the safetensors index is " + std::to_string(text.size()) +
                     " bytes, over the limit of " + std::to_string(kMaxIndexBytes));
  auto where = [](const JsonStructure& s) {
    return s.last_key.empty() ? std::string() : " (near key " + attn::quoted(s.last_key, 60) + ")";
  };
  check_json_structure(
      text, kIndexLimits,
      [&](const JsonStructure& s) {
        throw InputError(src + ": the safetensors index nests deeper than " +
                         std::to_string(kIndexLimits.max_depth) + " levels" + where(s));
      },
      [&](const JsonStructure&, const std::string& key) {
        throw InputError(src + ": the safetensors index lists key " + attn::quoted(key, 60) +
                         " twice");
      },
      [&](const JsonStructure& s, const std::string& what) {
        throw InputError(src + ": the safetensors index holds " + what + where(s));
      });
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(src + ": the safetensors index is not valid JSON: " + escape(e.what(), 160));
  }
}

}  // namespace

Checkpoint parse_index(const std::string& text, const std::filesystem::path& path) {
  const json j = index_json(text, path);
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

namespace {

// The name of the file holding tensor `name`. Throws InputError if none does.
const std::string& file_name(const Checkpoint& c, const std::string& name) {
  const auto it = c.weight_map.find(name);
  if (it == c.weight_map.end())
    throw InputError(c.path + ": tensor " + attn::quoted(name) + " is missing");
  return it->second;
}

// The index and the shard must agree, or a tensor would be read from the wrong place.
void check_holds(const Checkpoint& c, const SafetensorsHeader& header, const std::string& name,
                 const std::string& file) {
  if (!header.tensors.count(name))
    throw InputError(c.path + ": tensor " + attn::quoted(name) + " is listed in file " +
                     attn::quoted(file) + ", which does not hold it");
}

}  // namespace

const TensorInfo& Checkpoint::info(const std::string& name) {
  const std::string& file = file_name(*this, name);
  if (auto mapped = files.find(file); mapped != files.end() && mapped->second)
    return mapped->second->info(name);
  auto read = headers.find(file);
  if (read == headers.end())
    read = headers.emplace(file, read_safetensors_header(dir / file)).first;
  check_holds(*this, read->second.header, name, file);
  return read->second.header.tensors.at(name);
}

const SafetensorsFile& Checkpoint::file_of(const std::string& name) {
  const std::string& name_of_file = file_name(*this, name);
  auto& file = files[name_of_file];
  if (!file) {
    const auto read = headers.find(name_of_file);
    file = std::make_unique<SafetensorsFile>(
        open_safetensors(dir / name_of_file, read == headers.end() ? nullptr : &read->second));
    if (read != headers.end()) headers.erase(read);
    check_holds(*this, file->header, name, name_of_file);
  }
  return *file;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(weight_map.size());
  for (const auto& entry : weight_map) out.push_back(entry.first);
  return out;
}

SourceTensor Checkpoint::describe(const std::string& name) {
  return source_tensor(info(name), escape((dir / file_name(*this, name)).string()));
}

SourceTensor Checkpoint::tensor(const std::string& name) {
  return file_of(name).entry(name);
}

Checkpoint open_index(const std::filesystem::path& path) {
  return parse_index(read_small_file(path, "safetensors index", kMaxIndexBytes), path);
}

Checkpoint open_index(const std::filesystem::path& path, const InputFile& file) {
  return parse_index(read_small_file(file, "safetensors index", kMaxIndexBytes), path);
}

Checkpoint open_checkpoint(const std::filesystem::path& path) {
  if (path.string().ends_with(".index.json")) return open_index(path);
  return open_checkpoint(path,
                         std::make_shared<const InputFile>(open_regular(path, "safetensors")));
}

Checkpoint open_checkpoint(const std::filesystem::path& path,
                           std::shared_ptr<const InputFile> opened) {
  if (path.string().ends_with(".index.json")) return open_index(path, *opened);
  Checkpoint c;
  c.path = escape(path.string());
  c.dir = path.parent_path();
  const std::string file = path.filename().string();
  // The header only: the file is mapped when a tensor's bytes are first asked for.
  const SafetensorsHeaderRead& read = c.headers[file] = read_safetensors_header(std::move(opened));
  for (auto& [name, info] : read.header.tensors) c.weight_map[name] = file;
  return c;
}

}  // namespace attn
