// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "app/models.hpp"

namespace {

using stormguard::sim::model_for;
using stormguard::sim::model_kind;
using stormguard::sim::model_option;
using stormguard::sim::models;
using stormguard::sim::models_taking;

TEST(SimModels, ScenarioArgumentsSelectTheirModel) {
  EXPECT_EQ(model_for("brooker-occ").kind, model_kind::brooker_occ);
  EXPECT_EQ(model_for("layers").kind, model_kind::layers);
  EXPECT_EQ(model_for("friday-night").kind, model_kind::time_series);
  EXPECT_EQ(model_for("").kind, model_kind::time_series);
  EXPECT_EQ(model_for("my/layers.json").kind, model_kind::time_series);
  EXPECT_EQ(model_for("Layers").kind, model_kind::time_series);  // names are case-sensitive
}

TEST(SimModels, EachModelTakesItsOwnOptions) {
  EXPECT_TRUE(model_for("layers").takes(model_option::layers));
  EXPECT_FALSE(model_for("layers").takes(model_option::sweep));
  EXPECT_TRUE(model_for("brooker-occ").takes(model_option::trials));
  EXPECT_FALSE(model_for("brooker-occ").takes(model_option::strategies));
  EXPECT_EQ(model_for("brooker-occ").sweep_key, "clients");
  EXPECT_EQ(model_for("x.json").sweep_key, "load");
  EXPECT_TRUE(model_for("x.json").takes(model_option::strategies));
  EXPECT_FALSE(model_for("x.json").takes(model_option::trials));
}

TEST(SimModels, RegistryListsEveryKindOnceInKindOrder) {
  std::set<model_kind> kinds;
  int index = 0;
  for (const auto& m : models()) {
    EXPECT_EQ(static_cast<int>(m.kind), index++) << m.name;  // the CLI indexes runners by kind
    kinds.insert(m.kind);
    EXPECT_FALSE(m.description.empty());
    EXPECT_EQ(m.takes(model_option::sweep), !m.sweep_key.empty()) << m.name;
  }
  EXPECT_EQ(kinds.size(), 3U);
}

TEST(SimModels, NamesTheModelsTakingAnOptionForMessages) {
  EXPECT_EQ(models_taking(model_option::trials), "brooker-occ");
  EXPECT_EQ(models_taking(model_option::strategies), "time-series scenarios and layers");
  EXPECT_EQ(models_taking(model_option::sweep), "time-series scenarios and brooker-occ");
}

}  // namespace
