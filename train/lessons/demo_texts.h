// The words the explorer's Lessons page shows beside each demo, in Chinese and English: the
// claim in Chinese (the English claim is the registry's, demos.cpp) and a short explanation of
// what the figure shows and why the claim holds.
#pragma once
#include <string>
#include <vector>
namespace sf::lessons {
struct DemoText {
  std::string name;        // the demo's name, as `scratchformer demo NAME` takes it
  std::string claim_zh;    // the registry's one-line claim, in Chinese
  std::string explain_en;  // 2-4 sentences: what the figures show, what to look at, why
  std::string explain_zh;  // the same in Chinese
};
// One entry per demo, in the registry's order.
const std::vector<DemoText>& demo_texts();
// The entry of `name`, or nullptr.
const DemoText* find_demo_text(const std::string& name);
}  // namespace sf::lessons
