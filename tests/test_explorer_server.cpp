// The explorer's server refuses requests a web page elsewhere could make a student's browser send
// (train/explorer/server.h): a Host that is not this server (DNS rebinding) and a POST from a
// foreign Origin (a cross-site form or fetch), with a 403 and a one-line JSON error. The rules as
// functions, then through a real server on loopback.
#include <catch2/catch.hpp>

#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "train/explorer/api.h"
#include "train/explorer/server.h"
#include "train/run_log.h"

using sf::explorer::refuse_host;
using sf::explorer::refuse_origin;

TEST_CASE("the explorer answers its own Host only: loopback names, its address, its port", "[explorer]") {
  CHECK(refuse_host("127.0.0.1:8080", "127.0.0.1", 8080).empty());
  CHECK(refuse_host("localhost:8080", "127.0.0.1", 8080).empty());
  CHECK(refuse_host("LOCALHOST:8080", "127.0.0.1", 8080).empty());
  CHECK(refuse_host("[::1]:8080", "::1", 8080).empty());
  CHECK(refuse_host("localhost", "127.0.0.1", 80).empty());  // no port: 80
  // A DNS name that resolves here (rebinding), another port, an empty Host: refused, one line.
  CHECK_THAT(refuse_host("evil.example:8080", "127.0.0.1", 8080),
             Catch::Contains("evil.example:8080") && Catch::Contains("http://127.0.0.1:8080/"));
  CHECK_FALSE(refuse_host("127.0.0.1:9999", "127.0.0.1", 8080).empty());
  CHECK_FALSE(refuse_host("localhost", "127.0.0.1", 8080).empty());
  CHECK_FALSE(refuse_host("", "127.0.0.1", 8080).empty());
  // Serving a class on every address: any IP literal, never a name.
  CHECK(refuse_host("192.168.1.20:8080", "0.0.0.0", 8080).empty());
  CHECK(refuse_host("[fe80::1]:8080", "::", 8080).empty());
  CHECK_FALSE(refuse_host("teacher.example:8080", "0.0.0.0", 8080).empty());
  CHECK_FALSE(refuse_host("192.168.1.20:8080", "127.0.0.1", 8080).empty());
}

TEST_CASE("a POST comes from the explorer's own pages or from no browser at all", "[explorer]") {
  CHECK(refuse_origin("", "127.0.0.1:8080").empty());  // curl, a script
  CHECK(refuse_origin("http://127.0.0.1:8080", "127.0.0.1:8080").empty());
  CHECK(refuse_origin("http://[::1]:8080", "[::1]:8080").empty());
  CHECK_THAT(refuse_origin("http://evil.example", "127.0.0.1:8080"), Catch::Contains("evil.example"));
  CHECK_FALSE(refuse_origin("null", "127.0.0.1:8080").empty());
  CHECK_FALSE(refuse_origin("http://127.0.0.1:9999", "127.0.0.1:8080").empty());
  CHECK_FALSE(refuse_origin("http://localhost:8080", "127.0.0.1:8080").empty());  // another origin to a browser
}

namespace {

// A new empty folder under the temporary directory.
std::filesystem::path fresh_dir(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / name;
  std::filesystem::create_directories(dir);
  return dir;
}

// An explorer over an empty runs folder, served on a free loopback port for the test's lifetime.
struct ServedExplorer {
  std::filesystem::path runs;
  sf::explorer::Explorer explorer;
  sf::explorer::Server server;
  int port;
  std::thread serving;
  explicit ServedExplorer(const std::string& name)
      : runs(fresh_dir(name)),
        explorer({runs.string(), runs.string(), ""}),
        server(explorer, {"127.0.0.1", 0}),
        port(server.bind()),
        serving([this] { server.run(); }) {}
  ~ServedExplorer() {
    server.stop();
    serving.join();
    std::filesystem::remove_all(runs);
  }
};

}  // namespace

TEST_CASE("a foreign Host or Origin gets a 403 from the running server", "[explorer]") {
  auto served = std::make_unique<ServedExplorer>("sf-test-explorer-host");
  const int port = served->port;
  httplib::Client client("127.0.0.1", port);
  const std::string self = "127.0.0.1:" + std::to_string(port);

  const httplib::Result own = client.Get("/api/info");
  const httplib::Result rebound = client.Get("/api/info", {{"Host", "evil.example:" + std::to_string(port)}});
  const httplib::Result foreign_post = client.Post("/api/translate", {{"Origin", "http://evil.example"}},
                                                   R"({"run": "x", "text": "hallo"})", "text/plain");
  const httplib::Result own_post = client.Post("/api/translate", {{"Origin", "http://" + self}},
                                               R"({"run": "x", "text": "hallo"})", "application/json");
  served.reset();  // stop the server before looking at the answers

  REQUIRE(own);
  CHECK(own->status == 200);
  REQUIRE(rebound);
  CHECK(rebound->status == 403);
  CHECK_THAT(nlohmann::json::parse(rebound->body).at("error").get<std::string>(), Catch::Contains("Host"));
  REQUIRE(foreign_post);
  CHECK(foreign_post->status == 403);
  REQUIRE(own_post);
  CHECK(own_post->status != 403);  // past the check: the explorer itself answers (no such run)
}

namespace {

// Sends `request` as it is to 127.0.0.1:port and returns what comes back until the server closes.
std::string raw_exchange(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    ::send(fd, request.data(), request.size(), 0);
    char buffer[4096];
    for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) reply.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return reply;
}

}  // namespace

TEST_CASE("a negative Content-Length is named as such, not as a body over the limit", "[explorer][errors]") {
  auto served = std::make_unique<ServedExplorer>("sf-test-explorer-length");
  const int port = served->port;
  const std::string host = "Host: 127.0.0.1:" + std::to_string(port) + "\r\n";
  const std::string negative =
      raw_exchange(port, "POST /api/translate HTTP/1.1\r\n" + host + "Content-Length: -5\r\nConnection: close\r\n\r\n");
  served.reset();
  CHECK_THAT(negative, Catch::StartsWith("HTTP/1.1 400"));
  CHECK_THAT(negative, Catch::Contains("bad Content-Length") && Catch::Contains("-5") && !Catch::Contains("over the limit"));
}

TEST_CASE("a silent Progress prints nothing (the explorer's batch loading on the server's console)", "[explorer]") {
  std::ostringstream captured;
  std::streambuf* before = std::cout.rdbuf(captured.rdbuf());
  sf::train::Progress::silent().line("train: kept 10 of 10 lines");
  sf::train::Progress().line("shown");
  std::cout.rdbuf(before);
  CHECK(captured.str() == "shown\n");
}
