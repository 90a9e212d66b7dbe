// Module: the base of every layer, in the style of PyTorch's C++ frontend.
//
// A module registers its parameters and submodules by name in its constructor:
//
//     Linear::Linear(int64_t in, int64_t out, Generator& gen) {
//       weight = register_parameter("weight", xavier_uniform({out, in}, gen));
//     }
//     MultiHeadAttention::MultiHeadAttention(...) {
//       q_proj = register_module("q_proj", std::make_shared<Linear>(D, D, gen));
//     }
//
// and then named_parameters() yields dotted paths ("encoder.layers.0.self_attn.q_proj.weight"),
// which are also the names in checkpoints. train()/eval() reach every descendant. No parameter
// is ever created inside forward.
//
// Forward hooks (trace mode, train/classroom/trace.h): every module's forward ends with
//
//     return run_forward_hooks(y);  // calls the hooks registered on this module, returns y
//
// so a hook sees each module's output the moment it is made, children before their parent:
//
//     auto handle = model.register_forward_hook_recursive(
//         [](const Module& m, const std::string& path, const Tensor& out) {
//           std::cerr << path << " " << m.type_name() << " " << shape_str(out.shape()) << "\n";
//         });
//     model.forward(src, tgt_in);  // prints src_embed, ..., encoder.layers.0.self_attn.q_proj, ...
//     handle.remove();
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace sf::nn {

// A model's parameters under their dotted paths, in registration order (what optimizers and
// data-parallel training take).
using NamedParameters = std::vector<std::pair<std::string, Tensor>>;

class Module;

// Called with the module, its dotted path (as given at registration) and its output.
using ForwardHook = std::function<void(const Module& module, const std::string& path, const Tensor& output)>;

// The hooks registered on one module (shared with the handles, which may outlive the module).
struct ForwardHookList {
  struct Entry {
    std::uint64_t id;
    std::string path;
    ForwardHook hook;
  };
  std::vector<Entry> entries;
  std::uint64_t next_id = 0;
};

// Returned by register_forward_hook*: remove() takes the hook(s) off again. Dropping the
// handle without remove() leaves the hooks in place (as in PyTorch).
class HookHandle {
 public:
  void remove();
  std::size_t size() const { return hooks_.size(); }  // modules this handle holds a hook on

 private:
  friend class Module;
  std::vector<std::pair<std::weak_ptr<ForwardHookList>, std::uint64_t>> hooks_;
};

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The class name shown in summaries ("Linear", "MultiHeadAttention").
  virtual const char* type_name() const = 0;

  // ---- parameters and children ----
  NamedParameters named_parameters() const;  // dotted, in order
  std::vector<Tensor> parameters() const;
  const std::vector<std::pair<std::string, Tensor>>& own_parameters() const { return params_; }
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }
  std::int64_t parameter_count() const;  // total number of scalar parameters

  // ---- modes ----
  void train(bool on = true);  // this module and every descendant
  void eval() { train(false); }
  bool is_training() const { return training_; }

  void zero_grad();  // drop every parameter's accumulated gradient

  // ---- forward hooks ----
  // Calls hook(*this, path, output) at the end of every forward of this module.
  HookHandle register_forward_hook(ForwardHook hook, const std::string& path = "");
  // The same hook on this module and every descendant, each with its dotted path under
  // `prefix` (this module's own path is `prefix` itself, "" by default). A module reachable
  // twice (shared embeddings) gets the hook once, under its first path.
  HookHandle register_forward_hook_recursive(const ForwardHook& hook, const std::string& prefix = "");

  // ---- state dictionary: parameter name -> tensor (shares storage with the parameters) ----
  std::map<std::string, Tensor> state_dict() const;
  // Copies values into the parameters. Every parameter must be present with the same shape
  // (an error names the first missing, unexpected or mismatched entry); dtypes are converted.
  void load_state_dict(const std::map<std::string, Tensor>& state);

 protected:
  // Registers a parameter: marks it as requiring grad and names it. Returns the tensor.
  Tensor register_parameter(const std::string& name, Tensor value);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }
  // Every forward ends with `return run_forward_hooks(out);`: calls this module's hooks (none
  // outside trace mode: one empty check) and returns `out` unchanged.
  Tensor run_forward_hooks(Tensor out) const;

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;
  void collect_modules(const std::string& path, std::vector<std::pair<std::string, Module*>>& out);

  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::shared_ptr<ForwardHookList> hooks_;  // null until the first hook is registered
};

// A list of modules of one kind, named "0", "1", ... (so paths read "layers.3.ffn").
template <class M>
class ModuleList : public Module {
 public:
  const char* type_name() const override { return "ModuleList"; }
  void push_back(std::shared_ptr<M> m) {
    items_.push_back(register_module(std::to_string(items_.size()), std::move(m)));
  }
  std::size_t size() const { return items_.size(); }
  M& operator[](std::size_t i) const { return *items_.at(i); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<M>> items_;
};

}  // namespace sf::nn
