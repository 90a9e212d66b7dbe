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
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace sf::nn {

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The class name shown in summaries ("Linear", "MultiHeadAttention").
  virtual const char* type_name() const = 0;

  // ---- parameters and children ----
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;  // dotted, in order
  std::vector<Tensor> parameters() const;
  const std::vector<std::pair<std::string, Tensor>>& own_parameters() const { return params_; }
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }
  std::int64_t parameter_count() const;  // total number of scalar parameters

  // ---- modes ----
  void train(bool on = true);  // this module and every descendant
  void eval() { train(false); }
  bool is_training() const { return training_; }

  void zero_grad();  // drop every parameter's accumulated gradient

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

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;

  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
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
