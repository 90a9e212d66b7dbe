#include "nn/module.h"

#include <stdexcept>

#include "autograd/node.h"

namespace sf::nn {

namespace {
void check_name(const std::string& name, const char* what) {
  if (name.empty() || name.find('.') != std::string::npos)
    throw std::invalid_argument(std::string("Module: ") + what + " name '" + name +
                                "' must be non-empty and contain no '.'");
}
}  // namespace

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  check_name(name, "parameter");
  for (const auto& [n, _] : params_)
    if (n == name) throw std::invalid_argument("Module: parameter '" + name + "' registered twice");
  value.requires_grad_(true);
  value.set_name(name);
  params_.emplace_back(name, value);
  return value;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_name(name, "submodule");
  if (!module) throw std::invalid_argument("Module: submodule '" + name + "' is null");
  for (const auto& [n, _] : children_)
    if (n == name) throw std::invalid_argument("Module: submodule '" + name + "' registered twice");
  module->train(training_);
  children_.emplace_back(name, std::move(module));
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [name, t] : params_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

NamedParameters Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", out);
  // A parameter shared by two modules (tied embeddings) is listed once, under its first name.
  std::vector<std::pair<std::string, Tensor>> unique;
  for (auto& [name, t] : out) {
    bool seen = false;
    for (const auto& [_, u] : unique) seen = seen || u.impl() == t.impl();
    if (!seen) unique.emplace_back(std::move(name), std::move(t));
  }
  return unique;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters()) out.push_back(t);
  return out;
}

std::int64_t Module::parameter_count() const {
  std::int64_t n = 0;
  for (const auto& [_, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [_, child] : children_) child->train(on);
}

// ---- forward hooks ----

void HookHandle::remove() {
  for (auto& [weak_list, id] : hooks_) {
    const std::shared_ptr<ForwardHookList> list = weak_list.lock();
    if (!list) continue;  // the module is gone
    auto& e = list->entries;
    for (auto it = e.begin(); it != e.end(); ++it)
      if (it->id == id) {
        e.erase(it);
        break;
      }
  }
  hooks_.clear();
}

HookHandle Module::register_forward_hook(ForwardHook hook, const std::string& path) {
  if (!hook) throw std::invalid_argument("register_forward_hook: the hook is empty");
  if (!hooks_) hooks_ = std::make_shared<ForwardHookList>();
  const std::uint64_t id = hooks_->next_id++;
  hooks_->entries.push_back({id, path, std::move(hook)});
  HookHandle handle;
  handle.hooks_.emplace_back(hooks_, id);
  return handle;
}

void Module::collect_modules(const std::string& path, std::vector<std::pair<std::string, Module*>>& out) {
  for (const auto& [_, seen] : out)
    if (seen == this) return;  // shared module: keep its first path
  out.emplace_back(path, this);
  for (auto& [name, child] : children_) child->collect_modules(path.empty() ? name : path + "." + name, out);
}

HookHandle Module::register_forward_hook_recursive(const ForwardHook& hook, const std::string& prefix) {
  std::vector<std::pair<std::string, Module*>> modules;  // (dotted path, module), parents first
  collect_modules(prefix, modules);
  HookHandle all;
  for (auto& [path, module] : modules) {
    HookHandle one = module->register_forward_hook(hook, path);
    all.hooks_.insert(all.hooks_.end(), one.hooks_.begin(), one.hooks_.end());
  }
  return all;
}

Tensor Module::run_forward_hooks(Tensor out) const {
  if (!hooks_ || hooks_->entries.empty()) return out;
  // A copy: a hook may remove hooks (its own included) while we iterate.
  const std::vector<ForwardHookList::Entry> entries = hooks_->entries;
  for (const auto& e : entries) e.hook(*this, e.path, out);
  return out;
}

void Module::zero_grad() {
  for (auto& [_, t] : named_parameters()) t.zero_grad();
}

std::map<std::string, Tensor> Module::state_dict() const {
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : named_parameters()) out.emplace(name, t);
  return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state) {
  const auto params = named_parameters();
  for (const auto& [name, t] : params) {
    auto it = state.find(name);
    if (it == state.end())
      throw std::invalid_argument("load_state_dict: missing parameter '" + name + "' of shape " +
                                  shape_str(t.shape()));
    if (it->second.shape() != t.shape())
      throw std::invalid_argument("load_state_dict: parameter '" + name + "' has shape " +
                                  shape_str(t.shape()) + " in the model but " +
                                  shape_str(it->second.shape()) + " in the state");
  }
  for (const auto& [name, _] : state) {
    bool known = false;
    for (const auto& [n, t] : params) known = known || n == name;
    if (!known) throw std::invalid_argument("load_state_dict: unexpected entry '" + name + "'");
  }
  NoGradGuard no_grad;
  for (auto& [name, t] : params) Tensor(t).copy_(state.at(name));
}

}  // namespace sf::nn
