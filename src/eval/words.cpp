#include "eval/words.h"

#include <algorithm>
#include <sstream>

namespace snapkv::eval {
namespace {

std::vector<std::string> split_words(const char* text) {
  std::istringstream in(text);
  std::vector<std::string> w;
  for (std::string s; in >> s;) w.push_back(s);
  std::sort(w.begin(), w.end());
  w.erase(std::unique(w.begin(), w.end()), w.end());
  return w;
}

constexpr const char* kAdjectives = R"(
able absent active afraid agile alert alive amber ample ancient angry annual anxious awake
bald bare basic bent better bitter blank bleak blind bold bored brave brief bright brisk broad
broken brown busy calm careful casual cheap cheerful chief chilly civil clean clear clever close
cloudy clumsy coarse cold common cool cosmic cozy crazy creamy crisp cruel curious curly dainty
damp daring dark dear decent deep dense direct dirty dizzy double dry dull dusty eager early
earnest easy elastic elder empty endless equal even exact exotic faint fair fancy fast fatal
fearless fierce filthy final fine firm flat fluffy fond foolish formal fragile frail free fresh
friendly frozen full funny fuzzy gentle giant giddy glad gloomy glossy golden good graceful grand
grateful great greedy green grim gritty grumpy handy happy hardy harsh hasty healthy heavy hidden
high hollow honest hot huge humble hungry icy idle immense jolly juicy keen kind large late lazy
lean legal level light little lively lonely long loose loud loyal lucky lumpy mad major
massive mature meek mellow merry mighty mild minor misty modern modest moist moral muddy mute
narrow nasty neat nervous new nice nimble noble noisy normal novel numb odd old open orange
ordinary pale patient plain pleasant plump polite poor posh precious pretty proud pure purple
quick quiet rapid rare raw ready real regular rich rigid ripe rough round royal rural rusty sad
safe salty sandy scarce secret serene shaggy shallow sharp shiny short shy silent silky silly
simple sleepy slim slow small smart smooth snug soft solid sore sour spare spicy splendid square
stale steady steep sticky stiff still stormy strange strict strong sturdy subtle sudden sunny
super sweet swift tall tame tender tense thick thin thirsty tidy tight tiny tired tough tricky
ugly unique upbeat urban useful vague valid vast velvet violet vivid warm wary weak wealthy weary
wet whole wicked wide wild wise witty wooden young zany zealous
)";

constexpr const char* kNouns = R"(
acorn actor airport alarm album anchor angle ankle apple apron arch arena armor arrow artist
attic author autumn avenue badge bakery balcony ball banana band banner barn barrel basket bath
battery beach beacon bean bear beard bed bee bell belt bench berry bicycle bird blanket blossom
boat bone book boot bottle boulder bowl box bracelet branch bread brick bridge broom brush bucket
bulb bundle butter button cabin cable cactus cake camel camera camp candle canoe canyon cap
captain car carpet carrot castle cat cave cellar chair chalk cherry chest chimney circle city
cliff clock cloud coast coat coffee coin comet compass cookie copper corn cottage cotton country
crayon crown crystal cup curtain cushion daisy dancer desert desk diamond dinner doctor dog
dolphin door dragon drawer dream drum duck eagle earth egg elbow elephant engine envelope falcon
farm feather fence fern field finger fire flag flame flute fog forest fork fossil fountain fox
frog garden garlic gate gem ghost giraffe glacier glass globe glove goat grape grass guitar
hammer harbor harp hat hawk helmet hill honey horizon horse hotel house island ivory jacket jar
jewel jungle kettle key kitchen kite knee knife ladder lake lamp lantern leaf lemon letter
library lighthouse lily lion lizard lobster locket machine magnet mango map marble market mask
meadow melon mirror monkey moon mountain mouse mug museum needle nest net night notebook ocean
office olive onion orchard otter owl oyster paddle palace panda paper parrot pasta path peach
pearl pebble pencil pepper piano picture pillow pilot pine planet plate pocket pond potato
puddle pumpkin puzzle quill rabbit radio rain rainbow raven ribbon river road robin rocket roof
rope rose saddle sail salmon sand scarf school scissors sea seed shadow shark sheep shell ship
shoe shovel silver singer sky sled snail snake snow soap sock sofa spider spoon squirrel stable
star statue stone storm stream street sugar suitcase summer sun swan sweater table tail teacher
temple tent thimble thunder ticket tiger tomato tooth torch tower tractor train treasure tree
trumpet tulip tunnel turtle umbrella valley vase village violin volcano wagon wallet walrus
wand water wave whale wheel whistle willow window wing winter wizard wolf zebra
)";

constexpr const char* kVerbs = R"(
accept achieve add admire admit advise agree allow announce answer appear arrange arrive ask
attach attend avoid bake balance bathe beg behave believe blink boil borrow bounce breathe build
bump calculate call camp carry carve catch celebrate change chase cheer chew choose clap climb
collect comb compare complain connect cook copy count cover crawl cross dance decide deliver
describe design dig divide doubt drag draw dress drift drop earn enjoy enter escape examine
explain explore fasten fetch fill find fix float fold follow gather glow grab greet grin guard
guess guide hammer hang happen harvest heal help hike hop hover hug hum hunt hurry imagine
improve include inform invent invite jog join juggle jump kick kneel knit knock laugh launch
learn lift listen live look love manage march mark measure melt mend mix move nod notice obey
offer open order pack paint pause pedal perform pick plan plant play polish pour pray prefer
press promise pull pump punch push question race rain reach read relax remember repair repeat
reply rescue return ride ring roar roll row rush sail scrub search settle sew shake share shiver
shout sing sip skate sketch ski skip sleep slide smile sneeze sniff solve sort sparkle spell
spill spin splash spray sprint squeeze stamp stare start stir stretch study swim swing talk tap
taste teach thank tickle travel trim trust tumble type unlock vanish visit wait walk wander wash
watch wave weave whisper whistle wink wish wonder work wrap write yawn yell zoom
)";

}  // namespace

const std::vector<std::string>& adjectives() {
  static const std::vector<std::string> w = split_words(kAdjectives);
  return w;
}
const std::vector<std::string>& nouns() {
  static const std::vector<std::string> w = split_words(kNouns);
  return w;
}
const std::vector<std::string>& verbs() {
  static const std::vector<std::string> w = split_words(kVerbs);
  return w;
}

const std::vector<std::string>& key_words() {
  static const std::vector<std::string> w = [] {
    std::vector<std::string> k;
    for (const auto& a : adjectives())
      for (const auto& n : nouns()) k.push_back(a + "-" + n);
    std::sort(k.begin(), k.end());
    k.erase(std::unique(k.begin(), k.end()), k.end());
    return k;
  }();
  return w;
}

std::vector<std::string> word_vocabulary(const std::vector<std::string>& extra) {
  std::vector<std::string> v;
  for (const auto* list : {&adjectives(), &nouns(), &verbs(), &extra}) {
    for (const auto& w : *list) {
      const bool letters = std::all_of(w.begin(), w.end(), [](char c) { return c >= 'a' && c <= 'z'; });
      if (letters && w.size() >= 3) v.push_back(w);
    }
  }
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace snapkv::eval
