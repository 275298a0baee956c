#include "attn/model/observer.hpp"

#include <string>

#include "attn/error.hpp"

namespace attn {

Site parse_site(std::string_view name) {
  std::string valid;
  for (std::size_t i = 0; i < kSiteCount; ++i) {
    if (kSiteNames[i] == name) return Site(i);
    valid += (i ? ", " : "") + std::string(kSiteNames[i]);
  }
  throw InputError("unknown site '" + std::string(name) + "': the sites are " + valid);
}

}  // namespace attn
