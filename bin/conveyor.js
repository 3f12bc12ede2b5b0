#!/usr/bin/env node
import "../dist/cli/conveyor.js";
