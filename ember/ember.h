// placeholder umbrella
