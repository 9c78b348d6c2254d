#pragma once
// The visitor idiom for std::visit: Overloaded{[](const A&) {...}, [](const B&) {...}}.

namespace pickle {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

}  // namespace pickle
