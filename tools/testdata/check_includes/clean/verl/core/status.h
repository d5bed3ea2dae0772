#pragma once
struct Status {};
